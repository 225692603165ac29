"""`layergate replay-worker`: a Locust worker for a replay whose master runs on another
host (`layergate replay --expect-workers N --master-bind HOST[:PORT]`). Its options are
`WorkerConfig`'s fields. It needs no traffic file, no run directory and no torch: the
master sends it the plan and the records and writes the results."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.cli_options import config_values, field_option
from layergate.harness.cli.exits import exits
from layergate.harness.replay.workers import WorkerConfig


def _option(name: str, *flags: str, **attrs: Any):
    return field_option(WorkerConfig, name, *flags, **attrs)


@exits(ExitCode.PASS, ExitCode.USAGE, PASS="the master ended the run",
       USAGE="bad options, or the master refused this worker (no or wrong worker token, "
             "name taken, clock skew)")
@click.command(name="replay-worker")
@_option("master", required=True, metavar="HOST[:PORT]")
@_option("name", metavar="NAME")
@_option("processes")
@_option("worker_token_file", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def command(ctx: click.Context, **params: Any) -> None:
    """Join a replay's master and send the records it hands out to the arms it names,
    measuring each from the master's intended send time (this host's clock offset is
    measured at the join and corrected). Runs until the master ends the run; a worker
    that stops mid-run loses nothing: its unfinished records go to other workers."""
    from layergate.harness.replay import auth
    from layergate.harness.replay.workers import worker_env

    config = WorkerConfig(**config_values(ctx, WorkerConfig))
    token = auth.token_from(config.worker_token_file, os.environ)
    cmd = config.command()
    env = worker_env(os.environ, config.name, config.processes)
    if token:
        env[auth.TOKEN_ENV] = token
    # this process becomes the Locust worker: signals and the exit code are Locust's
    os.execvpe(cmd[0], cmd, env)
