"""`layergate gate RUN_DIR`: the release verdict, for people and for CI; its exit code is
the verdict's (layergate.exporters.catalogue.ExitCode, docs/CLI.md)."""

from __future__ import annotations

from pathlib import Path

import click

from layergate.exporters.catalogue import REQUIRE_ANY, ExitCode
from layergate.exporters.cli_options import field_option
from layergate.harness.cli.exits import RUN_DIR_UNREADABLE, exits
from layergate.harness.cli.options import policy_option
from layergate.harness.gate import SequentialConfig


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
    not marked complete, or an arm whose error rate is over the policy's limit, fails; an
    error rate within a limit above 0 passes only once its exact upper bound is too.

    Policy keys (docs/FORMATS.md): threshold, direction (>= or <=; default the figure's
    good side), critical, min_samples, required, subtract_noise_floor (figures with an
    excess over the noise floor: compare B-vs-A minus A'-vs-A), arm;
    top level: extends, target_rer, process_spread, max_error_rate (default 0: no error
    seen), error_rate_confidence, require_complete, gate_scenarios, multiplicity (holm,
    bonferroni or none: across several candidates), scenarios (per-scenario overrides),
    rollout (RRR bounds for vip / public_5pct / full).

    A run with several candidates (`replay --candidate NAME=URL ...`) judges each against
    the same baseline and noise floor, at a confidence adjusted across them by the policy's
    `multiplicity` (Holm by default), and prints a leaderboard (intervals at the family-wise
    level) and the recommendation: of the passing candidates not worse than the best, the
    one that saves the most (its RER, or with --capacity its capacity sweep's ratio).

    --sequential judges the requests in send order with confidence sequences instead
    (docs/METRICS.md, "Sequential verdicts"): the verdict `replay --until-decided` stopped on.
    """
    from rich.console import Console

    from layergate.harness.capacity.verdict import SWEEPS
    from layergate.harness.gate import decide_family, gate_dir, load_policy
    from layergate.harness.report import formats
    from layergate.harness.report.family import print_verdict
    from layergate.harness.report.sequential import sequential_lines

    policy = load_policy(policy_path)
    err = Console(stderr=True)

    def wrote(path: Path) -> None:
        err.print(f"wrote {path}", highlight=False)

    others = {"junit": junit_path, "markdown": markdown_path, "html": html_path}
    if sequential:
        if capacity:
            raise click.BadParameter("not with --sequential (the leaderboard is the fixed "
                                     "gate's)", param_hint="--capacity")
        if any(p is not None for p in others.values()):
            raise click.UsageError("--sequential writes --json only (not --junit, "
                                   "--markdown, --html)")
        with err.status(f"judging {run_dir} in send order"):
            decided = decide_family(run_dir, policy, require, budget)
        formats.SEQUENTIAL.write(decided, {"json": json_path}, wrote=wrote)
        for line in sequential_lines(decided):
            click.echo(line)
        raise SystemExit(decided.exit_code)
    if budget is not None:
        raise click.BadParameter("only with --sequential", param_hint="--budget")
    outcome = gate_dir(run_dir, policy, require, SWEEPS, capacity, busy=err.status)
    for note in outcome.notes:
        err.print(note, highlight=False, soft_wrap=True)
    formats.GATE.write(outcome.family, {"json": json_path, **others}, busy=err.status,
                       wrote=wrote)
    print_verdict(outcome.family)
    raise SystemExit(outcome.family.exit_code)
