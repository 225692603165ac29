"""`layergate capacity`: capacity at the SLO for every arm, paired step by step, with the
ratio to the baseline and its noise floor. Its options are `CapacityConfig`'s fields and
one URL and one model option per catalogued arm (as `replay`'s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.cli_options import config_values, field_option
from layergate.harness.capacity.config import CapacityConfig, sweep_arms
from layergate.harness.cli.exits import exits
from layergate.harness.cli.options import arm_options, arms_and_models
from layergate.harness.interrupts import sigterm_interrupts


def _option(name: str, *flags: str, **attrs: Any):
    return field_option(CapacityConfig, name, *flags, **attrs)


@exits(ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE, ExitCode.INCONCLUSIVE,
       ExitCode.INFRASTRUCTURE, PASS="every arm's capacity found",
       FAIL="interrupted (go on with --resume)",
       INCONCLUSIVE="an arm fails the SLO at the lowest step, or its ladder reached the "
                    "bounds first (capacity >= X)",
       INFRASTRUCTURE="an arm is not there or went down, or --out is unreadable")
@click.command(name="capacity")
@_option("traffic", type=click.Path(dir_okay=False, path_type=Path))
@_option("scenario", metavar="NAME")
@arm_options
@_option("out", required=True, type=click.Path(file_okay=False, path_type=Path))
@_option("slo", metavar="KEY:LIMIT,...")
@_option("slo_attainment", metavar="SHARE")
@_option("max_error_rate", metavar="SHARE")
@_option("load")
@_option("start", metavar="LOAD")
@_option("factor", metavar="F")
@_option("bisections", metavar="K")
@_option("max_load", metavar="LOAD")
@_option("warmup", metavar="S")
@_option("min_requests", metavar="N")
@_option("min_duration", metavar="S")
@_option("knee_steps", metavar="K")
@_option("idle_timeout", metavar="S")
@_option("max_requests", metavar="N")
@_option("max_time", metavar="S")
@_option("resume")
@_option("timeout", metavar="S")
@_option("max_in_flight", metavar="N")
@_option("processes", metavar="N")
@_option("preflight_timeout", metavar="S")
@_option("resamples", metavar="B")
@_option("replicates", metavar="R")
@_option("process_spread", metavar="TAU")
@_option("restart", metavar="CMD")
@_option("restart_timeout", metavar="S")
@_option("target_half_width", metavar="W")
@_option("seed")
@_option("metrics_port")
@_option("metrics_linger_s", "--metrics-linger", metavar="S")
@_option("bind_host", metavar="HOST")
@_option("progress")
@click.pass_context
def command(ctx: click.Context, **params: Any) -> None:
    """Step the offered load for every arm until each misses its SLO, and report each
    arm's capacity (the highest load it carries within the SLO) and the candidate's
    capacity against the baseline's, with baseline2's as the noise floor.

    A geometric ladder (--start, --factor) finds each arm's bracket, bisection refines it
    (--bisections); every step replays the same requests (drawn from --traffic or
    --scenario in order, cycled) at the same intended times to every arm still stepping
    (open loop: Poisson at the step's rate; --load users: closed loop). An arm passes a
    step when --slo-attainment of its measured requests (after --warmup) meet every --slo
    limit, its errors are within --max-error-rate and it did not saturate. Each step is
    stored as it completes (OUT/capacity.json, the report, steps/NNN/ replay run
    directories); Ctrl-C leaves the sweep interrupted with its partial report, and
    --resume goes on with the stored SLO, ladder and traffic (this call's arm URLs and
    bounds): the stored steps count, and the step that was in flight is sent again from
    its start. `layergate gate OUT` judges the report under a policy.

    --replicates R runs R sweeps (OUT/replicate-NN/, each its own seed and a dithered
    start) and gives the capacity ratio's interval across them (OUT/replicates.json, with
    how many replicates --target-half-width needs): one sweep's own interval covers the
    ratio far less often than it says (docs/METRICS.md, "Capacity at the SLO"). With
    --restart CMD each replicate runs on freshly restarted arms, and the interval needs no
    --process-spread prior.
    """
    from layergate.harness.capacity.report import exit_of, print_sweep, sweep_figures
    from layergate.harness.capacity.sweep import run_capacity
    from layergate.harness.sweepdir import SweepDir

    sigterm_interrupts()
    arms, models = sweep_arms(*arms_and_models(params))
    try:
        config = CapacityConfig(arms=arms, models=models, **config_values(ctx, CapacityConfig))
        if config.replicates > 1:
            _replicated(config)
        state, config = run_capacity(config, echo=lambda line: click.echo(line, err=True))
    except KeyboardInterrupt:
        click.echo(f"interrupted: the sweep in {params['out']} is marked interrupted, its "
                   f"partial report is {SweepDir(params['out']).report_path}; go on with "
                   "--resume", err=True)
        raise SystemExit(ExitCode.FAIL) from None
    figures = sweep_figures(state, config)
    print_sweep(figures, state, config, echo=click.echo)
    raise SystemExit(exit_of(state, figures))


def _replicated(config: CapacityConfig) -> None:
    """--replicates R: R sweeps from their own seeds, then the interval across them."""
    from layergate.harness.capacity.replicates import (
        replicates_exit,
        replicates_lines,
        run_replicates,
    )
    from layergate.harness.capacity.sweep import run_capacity

    def one(sub: CapacityConfig) -> None:
        click.echo(f"replicate {sub.out.name}: seed {sub.seed}, start {sub.start:g}", err=True)
        run_capacity(sub, echo=lambda line: click.echo(line, err=True))

    report = run_replicates(config, one, echo=lambda line: click.echo(line, err=True))
    for line in replicates_lines(report):
        click.echo(line)
    raise SystemExit(replicates_exit(report))
