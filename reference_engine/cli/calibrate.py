"""`layergate calibrate`: profile the layers on real traffic and write the rules file that
`serve --skip-policy static|dynamic|speculative` uses. Its options are `CalibrationConfig`'s
fields (torch-free); the calibration itself, and torch, load only inside the command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layergate.exporters import extras
from layergate.exporters.cli_options import config_values, field_option
from layergate.exporters.traffic import TrafficError, read_traffic
from layergate.reference_engine.calibration.config import CalibrationConfig


def _check_traffic(value: str) -> Path:
    try:
        read_traffic(value)  # bad lines fail here, before minutes of model work
    except TrafficError as exc:
        raise ValueError(str(exc)) from exc
    return Path(value)


def _ints(value: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in value.split(",") if x.strip())
    except ValueError as exc:
        raise ValueError(f"expected comma-separated integers, got {value!r}") from exc
    if any(x < 0 for x in out):
        raise ValueError(f"values must be >= 0, got {value!r}")
    return out


def _listed(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


def _option(name: str, *flags: str, **attrs: Any):
    return field_option(CalibrationConfig, name, *flags, **attrs)


@click.command("calibrate")
@_option("traffic", required=True, parse=_check_traffic,
         type=click.Path(exists=True, dir_okay=False))
@_option("out", required=True, type=click.Path(dir_okay=False, path_type=Path))
@_option("report_dir", "--report", type=click.Path(file_okay=False, path_type=Path))
@_option("target_consistency")
@_option("max_prompts")
@_option("max_tokens")
@_option("drift_prompts")
@_option("skip_counts", parse=_ints, show=_listed)
@_option("draft_skips", parse=_ints, show=_listed)
@_option("draft_exits", parse=_ints, show=_listed)
@_option("gammas", parse=_ints, show=_listed)
@_option("model")
@_option("threads")
@click.pass_context
def command(ctx: click.Context, **_: Any) -> None:
    """Calibrate the layer-skipping policies on real traffic.

    \b
    1. Profile: per layer, block influence (1 - cos), near-zero update share,
       share of decode time, output drift (KL) when skipped alone -> layers.csv/png.
    2. Sweep: decider thresholds x layers skipped, scored by exact match of the
       whole greedy output against full depth -> sweep.csv/png; drafts x gamma for
       speculative, scored by decode speed predicted from measured acceptance and
       pass times -> speculative.csv/png.
    3. Choose: the most skipping that keeps consistency >= target (or nothing, said
       plainly), the static set, and the cheapest draft (saying whether it beats full).

    Takes minutes on a CPU (24 prompts x 24 tokens: a few minutes on 2 idle cores).
    Needs the `engine` extra: pip install 'layergate[engine]'.
    """
    extras.require(extras.ENGINE, "calibrate")
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from layergate.reference_engine.calibration.run import calibrate

    values = config_values(ctx, CalibrationConfig)
    values["gammas"] = tuple(g for g in values["gammas"] if g > 0) or (1,)
    cfg = CalibrationConfig(**values)
    console = Console(stderr=True)
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bars:

        def stage(name: str, total: int):
            task = bars.add_task(name, total=total)
            return lambda: bars.advance(task)

        try:
            result = calibrate(cfg, stage)
        except ValueError as exc:  # bad prompts, unknown model: say what, exit 2
            raise click.UsageError(str(exc)) from exc
    click.echo(f"rules: {result.rules_path}")
    for note in result.notes:
        click.echo(f"  {note}")
    for path in result.report_files:
        click.echo(f"report: {path}")
