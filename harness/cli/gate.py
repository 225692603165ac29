"""`layergate gate RUN_DIR`: the release verdict, for people and for CI; its exit code is
the verdict's (layergate.exporters.catalogue.ExitCode, docs/CLI.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from layergate.exporters.catalogue import BASELINE, CANDIDATE, OVERALL, REQUIRE_ANY, ExitCode
from layergate.exporters.cli_options import field_option
from layergate.harness.cli.exits import RUN_DIR_UNREADABLE, exits
from layergate.harness.cli.options import policy_option
from layergate.harness.gate.sequential_config import SequentialConfig

if TYPE_CHECKING:
    from rich.console import Console

    from layergate.harness.gate import GateResult
    from layergate.harness.gate.family import FamilyResult


@exits(*ExitCode, INFRASTRUCTURE=RUN_DIR_UNREADABLE)
@click.command("gate")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@policy_option
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the verdict and every metric (value, CI, threshold, noise floor, "
                   "status) as JSON.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write JUnit XML: one test case per metric x scenario.")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a Markdown summary (e.g. to $GITHUB_STEP_SUMMARY).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write one self-contained HTML report with tables, plots and the worst "
                   "diverging requests.")
@click.option("--require", default=REQUIRE_ANY, show_default=True, metavar="all|any|NAME",
              help="With several candidates in the run: the run passes when every candidate "
                   "passes (all), when one does (any: choosing among them), or when the "
                   "candidate NAME does. The exit code follows it.")
@click.option("--capacity", multiple=True, metavar="[NAME=]SWEEP_DIR",
              help="A capacity sweep of candidate NAME (`layergate capacity`; a bare "
                   "SWEEP_DIR: the candidate `candidate`): its capacity ratio, as the share "
                   "1 - 1/ratio of the baseline's cost, is that candidate's saving on the "
                   "leaderboard instead of its RER. Repeatable.")
@field_option(SequentialConfig, "sequential")
@field_option(SequentialConfig, "budget", metavar="N")
def command(run_dir: Path, policy_path: Path | None, json_path: Path | None,
            junit_path: Path | None, markdown_path: Path | None,
            html_path: Path | None, require: str, capacity: tuple[str, ...],
            sequential: bool, budget: int | None) -> None:
    """Decide whether the candidate in RUN_DIR may ship, under a gate policy (--policy;
    without it the bundled `default`: no regression and RER >= 0.20).

    Each policy metric passes when its confidence interval lies wholly on the good side of
    its threshold, fails when wholly on the bad side, and is inconclusive otherwise (or with
    too few samples, or when it cannot be computed). Any critical failure fails the run;
    otherwise any critical inconclusive makes it inconclusive. Fail-closed: a run that is
    not marked complete, or an arm whose error rate is over the policy's limit, fails.

    Policy keys (docs/FORMATS.md): threshold, direction (>= or <=; default the figure's
    good side), critical, min_samples, required, subtract_noise_floor (figures with an
    excess over the noise floor: compare B-vs-A minus A'-vs-A), arm;
    top level: extends, target_rer, process_spread, max_error_rate, require_complete,
    gate_scenarios, multiplicity (holm, bonferroni or none: across several candidates),
    scenarios (per-scenario overrides), rollout (RRR bounds for vip / public_5pct / full).

    A run with several candidates (`replay --candidate NAME=URL ...`) judges each against
    the same baseline and noise floor, at a confidence adjusted across them by the policy's
    `multiplicity` (Holm by default), and prints a leaderboard (intervals at the family-wise
    level) and the recommendation: of the passing candidates not worse than the best, the
    one that saves the most (its RER, or with --capacity its capacity sweep's ratio).

    --sequential judges the requests in send order with confidence sequences instead
    (docs/METRICS.md, "Sequential verdicts"): the verdict `replay --until-decided` stopped on.
    """
    from rich.console import Console

    from layergate.harness.capacity.replicates import is_replicated
    from layergate.harness.capacity.verdict import evaluate_replicates, evaluate_sweep
    from layergate.harness.gate import load_policy
    from layergate.harness.gate.family import evaluate_family
    from layergate.harness.rundir import load_run
    from layergate.harness.sweepdir import is_sweep

    policy = load_policy(policy_path)
    err = Console(stderr=True)
    if sequential and capacity:
        raise click.BadParameter("not with --sequential (the leaderboard is the fixed "
                                 "gate's)", param_hint="--capacity")
    if sequential:
        _sequential(run_dir, policy, budget, require, json_path,
                    (junit_path, markdown_path, html_path), err)
    if budget is not None:
        raise click.BadParameter("only with --sequential", param_hint="--budget")
    if is_replicated(run_dir):  # `capacity --replicates`: the ratio across them
        swept = evaluate_replicates(run_dir, policy)
        _report_one(swept, swept.exit_code, json_path, junit_path, markdown_path,
                    html_path, err)
    if is_sweep(run_dir):  # a `layergate capacity` sweep: its capacity figures
        with err.status(f"judging the capacity sweep in {run_dir}"):
            swept = evaluate_sweep(run_dir, policy)
        _report_one(swept, swept.exit_code, json_path, junit_path, markdown_path,
                    html_path, err)
    with err.status(f"reading {run_dir}"):
        run = load_run(run_dir)
    ratios = _capacity_ratios(capacity)
    with err.status(f"computing figures for {run.result_count} results "
                    "(bootstrap CIs)"):
        family = evaluate_family(run, policy, require, capacity=ratios)
    paths = (json_path, junit_path, markdown_path, html_path)
    stopped = optional_stopping(run.manifest)
    if stopped:
        err.print(f"warning: {stopped}", highlight=False, soft_wrap=True)
    for name, ratio in ratios.items():
        if ratio.detail.get(BASELINE) != run.manifest.arms.get(BASELINE):
            err.print(f"note: --capacity {name}: the sweep's baseline "
                      f"({ratio.detail.get(BASELINE)}) is not the run's "
                      f"({run.manifest.arms.get(BASELINE)}): its capacity ratio is against "
                      "another baseline", highlight=False, soft_wrap=True)
    if len(family.candidates) == 1:  # one candidate: the reports of a one-candidate run
        if capacity:
            err.print("note: --capacity ranks candidates on the leaderboard; a run with one "
                      "candidate has none (gate the sweep itself: layergate gate SWEEP_DIR)",
                      highlight=False, soft_wrap=True)
        _report_one(family.candidates[0].result, family.exit_code, *paths, err)
    _write_reports(family, *paths, err)
    from layergate.harness.report.family import print_family

    print_family(family)
    raise SystemExit(family.exit_code)


def optional_stopping(manifest) -> str | None:
    """Why the fixed gate's intervals do not hold on a run stopped by `--until-decided`
    (None when it was not): they assume the sample size was fixed before the first look."""
    stopped = sorted(manifest.arms_stopped) if manifest.arms_stopped else []
    if not manifest.stopped_early and not stopped:
        return None
    which = f" (stopped: {', '.join(stopped)})" if stopped else ""
    return (f"this run was stopped early by --until-decided{which}: the fixed gate's "
            "intervals assume a sample size fixed in advance and do not hold after optional "
            "stopping; judge it with `layergate gate --sequential` (the verdict it stopped on)")


def _capacity_ratios(values: tuple[str, ...]) -> dict:
    """`--capacity [NAME=]SWEEP_DIR` as candidate -> the sweep's capacity ratio figure."""
    from layergate.harness.capacity.verdict import capacity_ratio

    out = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            name, path = CANDIDATE, value
        if name in out:
            raise click.BadParameter(f"candidate {name!r} given twice", param_hint="--capacity")
        out[name] = capacity_ratio(path)
    return out


def _report_one(result: GateResult, exit_code: int, json_path: Path | None,
                junit_path: Path | None, markdown_path: Path | None, html_path: Path | None,
                err: Console) -> None:
    """The reports, the summary and the exit code of one judged candidate (or sweep)."""
    from layergate.harness.report import print_summary

    _write_reports(result, json_path, junit_path, markdown_path, html_path, err)
    print_summary(result)
    raise SystemExit(exit_code)


def _write_reports(result: GateResult | FamilyResult, json_path: Path | None,
                   junit_path: Path | None, markdown_path: Path | None, html_path: Path | None,
                   err: Console) -> None:
    from layergate.harness import report
    from layergate.harness.gate.family import FamilyResult
    from layergate.harness.report import family as several

    one = not isinstance(result, FamilyResult)
    writers = (("--json", json_path, report.write_json if one else several.write_family_json),
               ("--junit", junit_path, report.write_junit if one
                else several.write_family_junit),
               ("--markdown", markdown_path, report.write_markdown if one
                else several.write_family_markdown),
               ("--html", html_path, report.write_html if one
                else several.write_family_html))
    for option, path, write in writers:
        if path is None:
            continue
        try:
            with err.status(f"writing {path}"):
                write(result, path)
        except OSError as exc:  # a path the user gave that cannot be written: usage error
            raise click.BadParameter(f"cannot write {path}: {exc.strerror or exc}",
                                     param_hint=option) from exc
        err.print(f"wrote {path}", highlight=False)


def _sequential(run_dir: Path, policy, budget: int | None, require: str,
                json_path: Path | None, others: tuple[Path | None, ...], err: Console) -> None:
    import json

    from layergate.exporters.catalogue import exit_code
    from layergate.harness.gate.family import check_require, combined, decide_each

    if any(p is not None for p in others):
        raise click.UsageError("--sequential writes --json only (not --junit, --markdown, "
                               "--html)")
    with err.status(f"judging {run_dir} in send order"):
        decisions = decide_each(run_dir, policy, budget)
    require = check_require(require, tuple(decisions))
    one = next(iter(decisions.values())) if len(decisions) == 1 else None
    verdict = one.verdict if one else combined({n: d.verdict for n, d in decisions.items()},
                                               require)
    if json_path is not None:
        out = one.to_json() if one else {
            "verdict": verdict, "require": require,
            "candidates": {n: d.to_json() for n, d in decisions.items()}}
        try:
            json_path.write_text(json.dumps(out, indent=2) + "\n")
        except OSError as exc:
            raise click.BadParameter(f"cannot write {json_path}: {exc.strerror or exc}",
                                     param_hint="--json") from exc
        err.print(f"wrote {json_path}", highlight=False)
    for name, decision in decisions.items():
        _print_decision(decision, None if one else name)
    if one is None:
        click.echo(f"run verdict (--require {require}): {verdict.upper()}")
    raise SystemExit(int(exit_code(verdict)))


def _print_decision(decision, name: str | None) -> None:
    from layergate.exporters.saturation import LOWER_THE_RATE

    budget_text = f" of a budget of {decision.budget}" if decision.budget else ""
    when = (f"decided after {decision.n} requests" if decision.decided
            else f"undecided after {decision.n} requests")
    who = "" if name is None else f" of candidate {name}"
    click.echo(f"sequential verdict{who}: {decision.verdict.upper()} ({when}{budget_text}; "
               f"{decision.available} judged in send order; confidence sequences at "
               f"{decision.confidence:.4g})")
    for f in decision.figures:
        flag = "" if f.counts else " (not gating)"
        where = "" if f.scenario == OVERALL else f" [{f.scenario}]"
        click.echo(f"  {f.state:<10} {f.name}{where}{flag}: {f.reason}")
    for arm, signals in decision.saturated.items():
        click.echo(f"  saturated  ttft_growth ({arm}): {'; '.join(signals)}; "
                   f"{LOWER_THE_RATE}")
    for reason in decision.reasons:
        click.echo(f"reason: {reason}")
