"""`layergate calibrate`: profile the layers on real traffic and write the rules file that
`serve --policy static|dynamic|speculative` uses. Reaches `reference_engine` (and torch) only
inside the command."""

from __future__ import annotations

from pathlib import Path

import click

from harness.traffic import TrafficError, read_traffic


def _check_traffic(ctx: click.Context, param: click.Parameter, value: str) -> Path:
    try:
        read_traffic(value)  # bad lines fail here, before minutes of model work
    except TrafficError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc
    return Path(value)


def _ints(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in value.split(",") if x.strip())
    except ValueError as exc:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from exc
    if any(x < 0 for x in out):
        raise click.BadParameter(f"values must be >= 0, got {value!r}")
    return out


@click.command("calibrate")
@click.option("--traffic", required=True, callback=_check_traffic,
              type=click.Path(exists=True, dir_okay=False),
              help="Calibration traffic (JSONL traffic format); real prompts, never templates.")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Rules file to write (e.g. scenarios/rules/smollm2-135m.json).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Directory for layers.csv/png, sweep.csv/png, speculative.csv/png.")
@click.option("--target-consistency", type=click.FloatRange(0.0, 1.0), default=0.99,
              show_default=True,
              help="Least share of whole greedy outputs that must stay identical to full "
                   "depth for a dynamic / static setting to be chosen.")
@click.option("--max-prompts", type=click.IntRange(min=1), default=24, show_default=True,
              help="Use the first N requests of the traffic.")
@click.option("--max-tokens", type=click.IntRange(min=2), default=24, show_default=True,
              help="Greedy tokens per request at most (the request's own max_tokens if lower).")
@click.option("--drift-prompts", type=click.IntRange(min=0), default=6, show_default=True,
              help="Prompts used for the per-layer drift (30 extra passes each).")
@click.option("--skip-counts", default="1,2,3,4,6,8", show_default=True, callback=_ints,
              help="Layers skipped (least influential first) tried by the dynamic sweep.")
@click.option("--draft-skips", default="4,6,8,10", show_default=True, callback=_ints,
              help="Speculative drafts that skip this many least influential layers.")
@click.option("--draft-exits", default="19,23", show_default=True, callback=_ints,
              help="Speculative drafts that exit after this layer index (empty: none).")
@click.option("--gammas", default="1,2,3,4,6", show_default=True, callback=_ints,
              help="Draft lengths tried for speculative.")
@click.option("--model", default="smollm2-135m", show_default=True,
              help="`smollm2-135m` or a local Hugging Face Llama-family directory.")
@click.option("--threads", type=click.IntRange(min=0), default=1, show_default=True,
              help="torch threads (timings in the report are measured with this many).")
def command(traffic: Path, out: Path, report_dir: Path | None, target_consistency: float,
            max_prompts: int, max_tokens: int, drift_prompts: int, skip_counts: tuple[int, ...],
            draft_skips: tuple[int, ...], draft_exits: tuple[int, ...], gammas: tuple[int, ...],
            model: str, threads: int) -> None:
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
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from reference_engine.calibration.run import CalibrationConfig, calibrate

    cfg = CalibrationConfig(traffic=traffic, out=out, report_dir=report_dir,
                            target_consistency=target_consistency, max_prompts=max_prompts,
                            max_tokens=max_tokens, drift_prompts=drift_prompts,
                            skip_counts=skip_counts, draft_skips=draft_skips,
                            draft_exits=draft_exits, gammas=tuple(g for g in gammas if g > 0)
                            or (1,), model=model, threads=threads)
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
