"""`layergate determinism`: the repeat suite (output, resource and latency determinism)."""

from __future__ import annotations

from pathlib import Path

import click


def _targets(values: tuple[str, ...]) -> dict[str, str]:
    targets: dict[str, str] = {}
    for value in values:
        arm, sep, url = value.partition("=")
        if not sep:
            arm, url = "candidate", value
        if arm in targets:
            raise click.BadParameter(f"arm {arm!r} given twice (use ARM=URL to name each)",
                                     param_hint="--target")
        targets[arm] = url
    return targets


def _levels(value: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        levels = ()
    if not levels or min(levels) < 1:
        raise click.BadParameter(f"expected positive integers like 1,4: {value!r}",
                                 param_hint="--concurrency")
    return levels


@click.command(name="determinism")
@click.option("--target", "targets", required=True, multiple=True, metavar="[ARM=]URL",
              help="Server to test; repeat as ARM=URL for several arms "
                   "(a bare URL is the arm `candidate`).")
@click.option("--traffic", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="JSONL traffic file; its first --requests records are the prompts.")
@click.option("--repeats", required=True, type=click.IntRange(min=2),
              help="How many times each prompt is sent at each concurrency level.")
@click.option("--concurrency", default="1", show_default=True, metavar="C[,C...]",
              help="Concurrency levels: requests in flight at once, e.g. 1,4.")
@click.option("--requests", type=click.IntRange(min=1), help="Use only the first K records.")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Run directory to create (e.g. RUN_DIR/determinism of a replay run).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=120.0,
              show_default=True, help="Seconds per request.")
@click.option("--model", metavar="NAME", help="`model` to put in every request body.")
@click.option("--skip-invalid", is_flag=True, help="Skip (and report) bad traffic lines.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def command(targets: tuple[str, ...], traffic: Path, repeats: int, concurrency: str,
            requests: int | None, out: Path, timeout: float, model: str | None,
            skip_invalid: bool, no_progress: bool) -> None:
    """Send each prompt --repeats times at each --concurrency level and store, per request,
    the token ids, the latencies and the engine-reported peak memory. `layergate metrics`
    turns them into output, resource and latency determinism.

    Exit codes: 0 complete, 1 interrupted, 2 usage error.
    """
    from harness.repeat_suite import DeterminismConfig, DeterminismError, run_determinism
    from harness.rundir import RunDir
    from harness.traffic import TrafficError

    try:
        config = DeterminismConfig(targets=_targets(targets), traffic=traffic, out=out,
                                   repeats=repeats, concurrency=_levels(concurrency),
                                   requests=requests, timeout=timeout, model=model,
                                   skip_invalid=skip_invalid, progress=not no_progress)
        run_dir = run_determinism(config)
    except (DeterminismError, TrafficError) as exc:
        raise click.UsageError(str(exc)) from exc
    except KeyboardInterrupt:
        click.echo(f"interrupted: {out} is marked interrupted", err=True)
        raise SystemExit(1) from None
    manifest = RunDir(run_dir).read_manifest()
    click.echo(f"{manifest.status}: {run_dir} ({manifest.counts_text()})")
