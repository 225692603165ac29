"""`layergate compare RUN_A RUN_B`: two runs of the same candidate (this week's against last
week's, release N against N-1) figure by figure; exit 1 on a regression."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from exporters.catalogue import CANDIDATE, ExitCode
from harness.cli.exits import RUN_DIR_UNREADABLE, exit_codes_help

if TYPE_CHECKING:
    from harness.gate.compare import Change, Comparison


@click.command("compare", epilog=exit_codes_help(
    ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE, ExitCode.INFRASTRUCTURE,
    PASS="no gated figure regressed", FAIL="a gated figure got worse beyond its threshold",
    INFRASTRUCTURE=RUN_DIR_UNREADABLE))
@click.argument("run_a", type=click.Path(file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(file_okay=False, path_type=Path))
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Gate policy whose critical rules say which figures are gated and their "
                   "thresholds (a bundled name or a YAML file). Default: default.")
@click.option("--arm", "arm", metavar="NAME",
              help="The candidate to compare in both runs (needed when they have several).")
@click.option("--arm-a", metavar="NAME", help="The candidate of RUN_A (default: --arm).")
@click.option("--arm-b", metavar="NAME", help="The candidate of RUN_B (default: --arm).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every figure of both runs, the change and the regressions as JSON.")
def command(run_a: Path, run_b: Path, policy_path: Path | None, arm: str | None,
            arm_a: str | None, arm_b: str | None, json_path: Path | None) -> None:
    """Compare the candidate of RUN_A (before) with that of RUN_B (after), each judged
    against its own baseline and noise floor under the same policy.

    Every figure is shown with both values and intervals, the change, and whether each run's
    value lies outside the other's interval. A regression is a gated figure (a critical rule
    of the policy) that moved to its bad side, outside both intervals, and is past its
    threshold in RUN_B. When the runs replayed different traffic (their traffic hashes
    differ) that is said, and the request-by-request comparison of the two candidates'
    answers is left out: only each run's own paired figures are compared.
    """
    from rich.console import Console

    from harness.gate import PolicyError, load_policy
    from harness.gate.compare import CompareError, compare_runs
    from harness.rundir import RunDirError, load_run

    try:
        policy = load_policy(policy_path)
    except PolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from exc
    err = Console(stderr=True)
    try:
        with err.status("reading both runs and computing their figures"):
            runs = load_run(run_a), load_run(run_b)
            comparison = compare_runs(*runs, policy, arm_a or arm, arm_b or arm)
    except CompareError as exc:
        raise click.UsageError(str(exc)) from exc
    except RunDirError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise SystemExit(ExitCode.INFRASTRUCTURE) from exc
    _print(comparison, Console())
    if json_path is not None:
        try:
            json_path.write_text(json.dumps(_to_json(comparison), indent=2) + "\n")
        except OSError as exc:
            raise click.BadParameter(f"cannot write {json_path}: {exc.strerror or exc}",
                                     param_hint="--json") from exc
        err.print(f"wrote {json_path}", highlight=False)
    raise SystemExit(ExitCode.FAIL if comparison.regressions else ExitCode.PASS)


def _n(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.4g}"


def _side(value: float | None, low: float | None, high: float | None) -> str:
    interval = "" if low is None or high is None else f" [{_n(low)}, {_n(high)}]"
    return f"{_n(value)}{interval}"


def _print(c: Comparison, console: Any) -> None:
    from rich.table import Table

    ra, rb = c.run_a, c.run_b
    console.print(f"A: run {ra.run_id}, candidate {c.arm_a} ({ra.verdict})  ·  "
                  f"B: run {rb.run_id}, candidate {c.arm_b} ({rb.verdict})", highlight=False)
    if c.same_traffic:
        console.print(f"same traffic (sha256 {str(c.traffic[0])[:12]}): the candidates' "
                      f"answers changed on {_n(c.outputs_changed)} of {c.paired} paired "
                      "requests", highlight=False)
    else:
        console.print(f"[bold yellow]the traffic differs[/] (sha256 {str(c.traffic[0])[:12]} "
                      f"vs {str(c.traffic[1])[:12]}): the answers are not paired across the "
                      "runs; each run's own paired figures are compared", highlight=False)
    table = Table(title="figure by figure (gated rows first; compared = the excess over the "
                        "noise floor where the policy subtracts it)", title_justify="left")
    for name in ("figure", "rule", "A", "B", "change", "outside both", ""):
        table.add_column(name)
    for ch in sorted(c.changes, key=lambda x: (not x.gated, not x.regression, x.name)):
        mark = "[bold red]regression[/]" if ch.regression else (
            "[yellow]worse[/]" if ch.worse and ch.outside else "")
        table.add_row(ch.name, ch.threshold or "·", _side(ch.a.value, ch.a.low, ch.a.high),
                      _side(ch.b.value, ch.b.low, ch.b.high),
                      "—" if ch.delta is None else f"{ch.delta:+.4g}",
                      "yes" if ch.outside else "", mark)
    console.print(table)
    words = ", ".join(r.name for r in c.regressions)
    console.print(f"[bold red]REGRESSION[/]: {words}" if words else
                  "no gated figure regressed", highlight=False)


def _change(ch: Change) -> dict[str, Any]:
    def fin(x: float | None) -> float | None:
        return None if x is None or not math.isfinite(x) else x
    return {"name": ch.name, "gated": ch.gated, "rule": ch.threshold or None,
            "a": {"value": fin(ch.a.value), "ci_low": fin(ch.a.low), "ci_high": fin(ch.a.high)},
            "b": {"value": fin(ch.b.value), "ci_low": fin(ch.b.low), "ci_high": fin(ch.b.high)},
            "delta": fin(ch.delta), "outside_both": ch.outside, "worse": ch.worse,
            "regression": ch.regression}


def _to_json(c: Comparison) -> dict[str, Any]:
    return {"a": {"run": c.run_a.run_id, CANDIDATE: c.arm_a, "verdict": c.run_a.verdict},
            "b": {"run": c.run_b.run_id, CANDIDATE: c.arm_b, "verdict": c.run_b.verdict},
            "same_traffic": c.same_traffic, "traffic_sha256": list(c.traffic),
            "outputs_changed": c.outputs_changed, "paired_requests": c.paired,
            "regressions": [r.name for r in c.regressions],
            "figures": [_change(ch) for ch in c.changes]}
