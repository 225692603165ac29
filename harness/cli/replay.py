"""`layergate replay`: shadow replay of traffic to baseline, baseline2 and one or more
candidates. Its options are `ReplayConfig`'s fields, and the arms' URLs and models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import COMPLETE, ExitCode
from layergate.exporters.cli_options import config_values, field_option
from layergate.harness.cli.exits import exits
from layergate.harness.cli.options import arm_options, arms_and_models
from layergate.harness.interrupts import sigterm_interrupts
from layergate.harness.replay.config import ReplayConfig


def _replay_option(name: str, *flags: str, **attrs: Any):
    return field_option(ReplayConfig, name, *flags, **attrs)


@exits(ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE, ExitCode.INFRASTRUCTURE, PASS=COMPLETE,
       FAIL="interrupted (finish it with --resume)",
       INFRASTRUCTURE="an arm is not there (nothing sent) or went down (interrupted: finish "
                      "it with --resume), too few workers joined, or the run directory is "
                      "unreadable")
@click.command(name="replay")
@_replay_option("traffic", type=click.Path(dir_okay=False, path_type=Path))
@_replay_option("scenario", metavar="NAME")
@arm_options
@_replay_option("out", required=True, type=click.Path(file_okay=False, path_type=Path))
@_replay_option("rate")
@_replay_option("users")
@_replay_option("requests")
@_replay_option("speed")
@_replay_option("processes")
@_replay_option("expect_workers", metavar="N")
@_replay_option("master_bind", metavar="HOST[:PORT]")
@_replay_option("worker_wait", metavar="S")
@_replay_option("worker_token_file", metavar="FILE",
                type=click.Path(dir_okay=False, path_type=Path))
@_replay_option("max_clock_skew", metavar="S")
@_replay_option("max_in_flight")
@_replay_option("preflight_timeout", metavar="S")
@_replay_option("breaker", metavar="K")
@_replay_option("resume")
@_replay_option("timeout")
@_replay_option("metrics_port")
@_replay_option("web_port")
@_replay_option("metrics_linger_s", "--metrics-linger", metavar="S")
@_replay_option("bind_host", metavar="HOST")
@_replay_option("seed")
@_replay_option("skip_invalid")
@_replay_option("progress")
@_replay_option("logprobs", metavar="K")
@_replay_option("tokenizer", metavar="PATH|MODEL")
@_replay_option("until_decided", metavar="POLICY",
                type=click.Path(dir_okay=False, path_type=Path))
@_replay_option("budget", metavar="N")
@_replay_option("conversation_mode")
@_replay_option("tool_simulator", metavar="CMD|URL")
@_replay_option("own_reasoning")
@click.pass_context
def command(ctx: click.Context, **params: Any) -> None:
    """Send every traffic record to every arm at the same intended time, streaming, through
    Locust (run in its own process), and write a run directory: manifest.json,
    results.sqlite (one row per request and arm), traffic.jsonl, and each arm's /metrics
    before and after in scrapes/.

    Latencies count from the intended send time (open loop, no coordinated omission).
    An arm that fails (timeout, HTTP error, refused connection) gets an error row per
    request; the run goes on. Ctrl-C leaves a consistent run marked `interrupted`;
    `--resume` sends what is missing: the (request, arm) pairs with no ok result. It is
    start-or-resume, so one command line can be run again and again (a container's): it
    starts the run where --out holds none, fills an interrupted one (or the error rows of a
    complete one), and leaves a complete run without error rows alone (exit 0, nothing
    sent).
    """
    from layergate.harness.policy_file import PolicyError
    from layergate.harness.replay import ConfigError, run_replay
    from layergate.harness.rundir import RunDir

    sigterm_interrupts()
    _traffic_replaces_environment_mix(ctx)
    arms, models = arms_and_models(params)
    try:
        config = ReplayConfig(arms=arms, models=models, **config_values(ctx, ReplayConfig))
        # judged as results arrive: sending stops once the policy is decided (or the budget);
        # the policy is read here, so a bad one is a usage error before anything is sent
        try:
            should_stop = None
            if config.until_decided is not None:  # the gate's machinery only when asked
                from layergate.harness.gate import until_decided

                should_stop = until_decided(config.until_decided, config.budget)
        except PolicyError as exc:
            raise ConfigError(f"--until-decided: {exc}") from exc
        run_dir = run_replay(config, should_stop)
    except KeyboardInterrupt:
        click.echo(f"interrupted: the run in {params['out']} is marked interrupted; "
                   "finish it with --resume", err=True)
        raise SystemExit(ExitCode.FAIL) from None
    manifest = RunDir(run_dir).read_manifest()
    click.echo(f"{manifest.status}: {run_dir} ({manifest.counts_text()})")
    if manifest.schedule:
        from layergate.exporters.figures.schedule_lag import ScheduleLag

        click.echo(f"schedule: {ScheduleLag.from_json(manifest.schedule).words()}")
    for note in manifest.notes:
        click.echo(f"note: {note}", err=True)
    if manifest.status != COMPLETE:
        raise SystemExit(ExitCode.FAIL)


def _traffic_replaces_environment_mix(ctx: click.Context) -> None:
    """A mix from the environment (LAYERGATE_REPLAY_SCENARIO: a container's default, as in
    docker-compose.yml) yields to a traffic file given any way: "exactly one" stays the
    rule for what is typed."""
    environment = click.core.ParameterSource.ENVIRONMENT
    if ctx.params.get("traffic") is not None and \
            ctx.get_parameter_source("scenario") is environment:
        ctx.params["scenario"] = None
