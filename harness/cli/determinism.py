"""`layergate determinism`: the repeat suite (output, resource and latency determinism). Its
options are `DeterminismConfig`'s fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import CANDIDATE, COMPLETE, INTERRUPTED, ExitCode
from layergate.exporters.cli_options import config_values, field_option, named_values
from layergate.harness.cli.exits import exits
from layergate.harness.determinism import DeterminismConfig


def _targets(values: tuple[str, ...]) -> dict[str, str]:
    try:
        return named_values(values, CANDIDATE, "arm")
    except ValueError as exc:
        raise ValueError(f"{exc} (use ARM=URL to name each)") from exc


def _levels(value: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        levels = ()
    if not levels or min(levels) < 1:
        raise ValueError(f"expected positive integers like 1,4: {value!r}")
    return levels


def _option(name: str, *flags: str, **attrs: Any):
    return field_option(DeterminismConfig, name, *flags, **attrs)


@exits(ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE, PASS=COMPLETE, FAIL=INTERRUPTED)
@click.command(name="determinism")
@_option("targets", "--target", required=True, multiple=True, parse=_targets,
         metavar="[ARM=]URL")
@_option("traffic", required=True, type=click.Path(dir_okay=False, path_type=Path))
@_option("repeats")
@_option("concurrency", parse=_levels, show=lambda levels: ",".join(map(str, levels)),
         metavar="C[,C...]")
@_option("requests")
@_option("out", required=True, type=click.Path(file_okay=False, path_type=Path))
@_option("timeout")
@_option("model", metavar="NAME")
@_option("skip_invalid")
@_option("progress")
@_option("logprobs", metavar="K")
@_option("tokenizer", metavar="PATH|MODEL")
@click.pass_context
def command(ctx: click.Context, **_: Any) -> None:
    """Send each prompt --repeats times at each --concurrency level and store, per request,
    the token ids, the latencies and the engine-reported peak memory. `layergate metrics`
    turns them into output, resource and latency determinism.
    """
    from layergate.harness.determinism import run_determinism
    from layergate.harness.rundir import RunDir

    try:
        run_dir = run_determinism(DeterminismConfig(**config_values(ctx, DeterminismConfig)))
    except KeyboardInterrupt:
        click.echo(f"interrupted: {ctx.params['out']} is marked interrupted", err=True)
        raise SystemExit(ExitCode.FAIL) from None
    manifest = RunDir(run_dir).read_manifest()
    click.echo(f"{manifest.status}: {run_dir} ({manifest.counts_text()})")
