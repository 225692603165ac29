"""`layergate compare RUN_A RUN_B`: two runs of the same candidate (this week's against last
week's, release N against N-1) figure by figure; exit 1 on a regression."""

from __future__ import annotations

from pathlib import Path

import click

from layergate.exporters.catalogue import ExitCode
from layergate.harness.cli.exits import RUN_DIR_UNREADABLE, exits
from layergate.harness.cli.options import policy_option


@exits(ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE, ExitCode.INFRASTRUCTURE,
       PASS="no gated figure regressed", FAIL="a gated figure got worse beyond its threshold",
       INFRASTRUCTURE=RUN_DIR_UNREADABLE)
@click.command("compare")
@click.argument("run_a", type=click.Path(file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(file_okay=False, path_type=Path))
@policy_option
@click.option("--arm", "arm", metavar="NAME",
              help="The candidate to compare in both runs (needed when they have several).")
@click.option("--arm-a", metavar="NAME", help="The candidate of RUN_A (default: --arm).")
@click.option("--arm-b", metavar="NAME", help="The candidate of RUN_B (default: --arm).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every figure of both runs, the change and the regressions as JSON.")
def command(run_a: Path, run_b: Path, policy_path: Path | None, arm: str | None,
            arm_a: str | None, arm_b: str | None, json_path: Path | None) -> None:
    """Compare the candidate of RUN_A (before) with that of RUN_B (after), each judged
    against its own baseline and noise floor under the same policy (--policy; without it
    the bundled `default`), whose critical rules say which figures are gated and their
    thresholds.

    Every figure is shown with both values and intervals, the change, and whether each run's
    value lies outside the other's interval. A regression is a gated figure (a critical rule
    of the policy) that moved to its bad side, outside both intervals, and is past its
    threshold in RUN_B. When the runs replayed different traffic (their traffic hashes
    differ) that is said, and the request-by-request comparison of the two candidates'
    answers is left out: only each run's own paired figures are compared.
    """
    from rich.console import Console

    from layergate.harness.gate import compare_runs, load_policy
    from layergate.harness.report import formats
    from layergate.harness.report.comparison import print_comparison
    from layergate.harness.rundir import load_run

    policy = load_policy(policy_path)
    err = Console(stderr=True)
    with err.status("reading both runs and computing their figures"):
        runs = load_run(run_a), load_run(run_b)
        comparison = compare_runs(*runs, policy, arm_a or arm, arm_b or arm)
    print_comparison(comparison, Console())
    formats.COMPARISON.write(comparison, {"json": json_path},
                             wrote=lambda path: err.print(f"wrote {path}", highlight=False))
    raise SystemExit(ExitCode.FAIL if comparison.regressions else ExitCode.PASS)
