"""`layergate metrics RUN_DIR`: compute a run's figures; print, write JSON, or serve them.
The figures are the gate's (harness/gate/fixed/run_view.py), the tables and JSON the report's
(harness/report/run_figures.py), the OTLP push and the Prometheus endpoint the exporters'."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.cli_options import config_values, field_option
from layergate.exporters.figures.config import MetricsConfig
from layergate.harness.cli.exits import RUN_DIR_UNREADABLE, exits
from layergate.harness.cli.options import policy_option

if TYPE_CHECKING:
    from rich.console import Console

    from layergate.harness.gate import RunView

@exits(ExitCode.PASS, ExitCode.USAGE, ExitCode.INFRASTRUCTURE, PASS="done",
       INFRASTRUCTURE=RUN_DIR_UNREADABLE)
@click.command("metrics")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every figure (value, CI, noise floor, n, status, detail) as JSON.")
@click.option("--serve", "port", type=click.IntRange(0, 65535),
              help="Serve the figures as Prometheus gauges (layergate_run_*) on this port "
                   "until Ctrl-C.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address --serve listens on.")
@policy_option
@field_option(MetricsConfig, "n_resamples", "--resamples")
@field_option(MetricsConfig, "seed")
@field_option(MetricsConfig, "min_samples")
@field_option(MetricsConfig, "target_rer", default_note="the policy's with --policy")
@field_option(MetricsConfig, "process_spread", default_note="the policy's with --policy")
@field_option(MetricsConfig, "tokenizer", metavar="PATH|MODEL")
@click.pass_context
def command(ctx: click.Context, run_dir: Path, json_path: Path | None, port: int | None,
            host: str, policy_path: Path | None, **_: Any) -> None:
    """Compute the figures of the run in RUN_DIR and print them as a table.

    RER (with its decode-only, theoretical and realised variants, and the rollout stage),
    termination accuracy, cache-hit delta, consistency (exact match, first divergence,
    BLEU, chrF, token KL) beside baseline2's noise floor, latency percentiles, goodput,
    error rates and the repeat suite's determinism; each overall and per scenario, with
    seeded paired-bootstrap CIs (stratified by scenario). Figures with too few samples are
    marked insufficient; figures whose definition does not apply, not computable.

    With --policy, its thresholds and the gate's verdict are exported too. With
    OTEL_EXPORTER_OTLP_ENDPOINT set, the figures are also pushed over OTLP.
    """
    from rich.console import Console

    from layergate.exporters.otel_export import push_run
    from layergate.harness.gate import load_policy, view_config, view_run
    from layergate.harness.replay.config import check_tokenizer
    from layergate.harness.report import formats
    from layergate.harness.report.run_figures import print_figures
    from layergate.harness.rundir import load_run

    err = Console(stderr=True)
    policy = load_policy(policy_path) if policy_path is not None else None
    settings = config_values(ctx, MetricsConfig, given_only=True)
    check_tokenizer(settings.get("tokenizer"))
    with err.status(f"reading {run_dir}"):
        run = load_run(run_dir)
    config = view_config(run, policy, settings)
    with err.status(f"computing figures for {run.result_count} results "
                    f"({config.n_resamples} bootstrap resamples)"):
        view = view_run(run, policy, config)
    print_figures(view)
    formats.FIGURES.write(view, {"json": json_path},
                          wrote=lambda path: err.print(f"wrote {path}", highlight=False))
    pushed = push_run(run.manifest.id, view.figures, run.results, os.environ)
    if pushed is not None:
        err.print(pushed, highlight=False)
    if port is not None:
        _serve(view, host, port, err)


def _serve(view: RunView, host: str, port: int, err: Console) -> None:
    from layergate.exporters.prometheus_export import RunFiguresCollector, serve_until_stopped

    run_id = view.run.manifest.id
    collector = RunFiguresCollector(run_id, view.figures, view.thresholds(), view.verdict,
                                    time.time() if view.verdict is not None else None)
    try:
        serve_until_stopped(collector, host, port, on_ready=lambda bound: err.print(
            f"serving {len(view.figures)} figures of run {run_id} on "
            f"http://{host}:{bound}/metrics (Ctrl-C to stop)", highlight=False))
    except OSError as exc:
        raise click.BadParameter(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                                 param_hint="--serve") from exc
