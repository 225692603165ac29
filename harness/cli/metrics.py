"""`layergate metrics RUN_DIR`: compute a run's figures; print, write JSON, or serve them."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from exporters.catalogue import (
    BLEU,
    ERROR_RATE,
    EXACT_MATCH,
    LATENCY_RATIO,
    RER,
    RER_THEORETICAL,
    TERMINATION_ACCURACY,
    ExitCode,
)
from exporters.cli_options import config_values, field_option
from exporters.config import MetricsConfig
from harness.cli.exits import RUN_DIR_UNREADABLE, exit_codes_help

if TYPE_CHECKING:
    from exporters.figures import Figure
    from harness.rundir import Run

# the figures of the per-scenario table
KEY_FIGURES = (RER, RER_THEORETICAL, TERMINATION_ACCURACY, EXACT_MATCH, BLEU, LATENCY_RATIO,
               ERROR_RATE)


@click.command("metrics", epilog=exit_codes_help(ExitCode.PASS, ExitCode.USAGE,
                                                  ExitCode.INFRASTRUCTURE, PASS="done",
                                                  INFRASTRUCTURE=RUN_DIR_UNREADABLE))
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write every figure (value, CI, noise floor, n, status, detail) as JSON.")
@click.option("--serve", "port", type=click.IntRange(0, 65535),
              help="Serve the figures as Prometheus gauges (layergate_run_*) on this port "
                   "until Ctrl-C.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address --serve listens on.")
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Gate policy (a bundled name or a YAML file): also export its "
                   "thresholds and the gate's verdict.")
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

    With OTEL_EXPORTER_OTLP_ENDPOINT set, the figures are also pushed over OTLP.
    """
    from rich.console import Console

    from harness.rundir import RunDirError, load_run

    err = Console(stderr=True)
    policy = _load_policy(policy_path)
    settings = config_values(ctx, MetricsConfig, given_only=True)
    _check_tokenizer(settings.get("tokenizer"))
    try:
        with err.status(f"reading {run_dir}"):
            run = load_run(run_dir)
        config = _config(run, policy, settings)
        with err.status(f"computing figures for {run.result_count} results "
                        f"({config.n_resamples} bootstrap resamples)"):
            figures = _figures(run, config)
            # the verdict judges the very figures shown and served, not a second computation
            # with the gate's own settings
            gate = _gate(run, policy, figures) if policy is not None else None
    except RunDirError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise SystemExit(ExitCode.INFRASTRUCTURE) from exc
    _print_tables(run, figures, gate)
    if json_path is not None:
        _write_json(json_path, run, figures, gate)
        err.print(f"wrote {json_path}", highlight=False)
    _push_otel(run, figures, err)
    if port is not None:
        _serve(run, figures, gate, host, port, err)


def _check_tokenizer(spec: str | None) -> None:
    from harness.replay.config import ConfigError, check_tokenizer

    try:
        check_tokenizer(spec)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc


def _load_policy(path: Path | None) -> Any:
    if path is None:
        return None
    from harness.gate import PolicyError, load_policy

    try:
        return load_policy(path)
    except PolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from exc


def _config(run: Run, policy: Any, given: dict[str, Any]) -> MetricsConfig:
    """The command line's settings over the gate's (with --policy: its target, its smallest
    min_samples) over the defaults; the tokenizer defaults to the one the run counted with."""
    from dataclasses import replace

    from harness.gate.evaluation import metrics_config

    base = metrics_config(policy, run) if policy is not None else MetricsConfig()
    return replace(base, **{"tokenizer": run.tokenizer, **given})


def _figures(run: Run, config: MetricsConfig) -> list[Figure]:
    from harness.gate.family import candidate_figures

    # the same rows and figures as the gate's; each candidate's on the arm of its name
    return candidate_figures(run, config)


def _gate(run: Run, policy: Any, figures: list[Figure]) -> Any:
    from harness.gate.evaluation import judge_figures
    from harness.gate.family import candidates_of, evaluate_family

    if len(candidates_of(run)) > 1:  # each candidate at its adjusted confidence
        return evaluate_family(run, policy)
    return judge_figures(run, policy, figures)


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    if unit == "s":
        return f"{value * 1000:.1f} ms" if abs(value) < 1 else f"{value:.3f} s"
    if unit == "bytes":
        return f"{value:,.0f} B"
    return f"{value:.4g}"


def _row(f: Figure) -> list[str]:
    ci = f"[{_fmt(f.ci_low, f.unit)}, {_fmt(f.ci_high, f.unit)}]" \
        if f.ci_low is not None or f.ci_high is not None else ""
    excess = f.detail.get("excess")
    floor = _fmt(f.noise_floor, f.unit) if f.noise_floor is not None else ""
    if excess is not None:
        floor += f" (Δ {excess:+.4g})"
    status = {"ok": "ok", "insufficient": "[yellow]insufficient[/]",
              "not_computable": "[red]not computable[/]"}[f.status]
    if f.reason:
        status += f" [dim]{f.reason}[/]"
    if "stage" in f.detail:
        status += f" [dim]stage {f.detail['stage']}[/]"
    if f.detail.get("p_value") is not None:
        status += f" [dim]p={f.detail['p_value']:.2g}[/]"
    return [f.name, f.arm, _fmt(f.value, f.unit), ci, floor, str(f.n), status]


def _print_tables(run: Run, figures: list[Figure], gate: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from exporters.answers import answer_summary, describe
    from exporters.figures import OVERALL

    console = Console()
    title = f"run {run.manifest.id} ({run.manifest.kind}, {run.manifest.status})"
    table = Table("figure", "arm", "value", "95% CI", "noise floor (excess)", "n", "status",
                  title=title, title_justify="left")
    for f in figures:
        if f.scenario == OVERALL:
            table.add_row(*_row(f))
    console.print(table)
    scenarios = sorted({f.scenario for f in figures} - {OVERALL})
    if scenarios:
        per = Table("figure", "arm", *scenarios, title="per scenario (value [CI])",
                    title_justify="left")
        index = {(f.name, f.arm, f.scenario): f for f in figures}
        for name in KEY_FIGURES:
            for arm in sorted({f.arm for f in figures if f.name == name}):
                cells = []
                for s in scenarios:
                    f = index.get((name, arm, s))
                    cells.append("—" if f is None or f.value is None else
                                 f"{_fmt(f.value, f.unit)} [{_fmt(f.ci_low, f.unit)}, "
                                 f"{_fmt(f.ci_high, f.unit)}]")
                per.add_row(name, arm, *cells)
        console.print(per)
    answers = Table("arm", "token counts from", "quirks (answers)",
                    title="what each arm's answers carried", title_justify="left")
    for arm, seen in answer_summary(run.tallies).items():
        answers.add_row(arm, describe(seen["tokens_from"]), describe(seen["quirks"]))
    console.print(answers)
    if gate is not None:
        console.print(f"gate verdict under the policy: [bold]{gate.verdict}[/]")


def _write_json(path: Path, run: Run, figures: list[Figure], gate: Any) -> None:
    from exporters.answers import answer_summary

    out = {"run": {"id": run.manifest.id, "kind": run.manifest.kind,
                   "status": run.manifest.status, "arms": run.manifest.arms,
                   "counts": run.manifest.counts, "answers": answer_summary(run.tallies)},
           "verdict": gate.verdict if gate is not None else None,
           "figures": [{**asdict(f), "unit": f.unit} for f in figures]}
    try:
        path.write_text(json.dumps(out, indent=2, default=float) + "\n", encoding="utf-8")
    except OSError as exc:
        raise click.BadParameter(f"cannot write {path}: {exc.strerror or exc}",
                                 param_hint="--json") from exc


def _thresholds(gate: Any) -> dict[tuple[str, str, str], float]:
    if gate is None:
        return {}
    return {(c.name, c.arm, c.scenario): c.threshold for c in gate.checks
            if c.threshold is not None}


def _push_otel(run: Run, figures: list[Figure], err: Any) -> None:
    from exporters.otel_export import OTLP_ENV

    endpoint = os.environ.get(OTLP_ENV)
    if not endpoint:
        return
    from exporters.otel_export import OtelRunExporter

    exporter = OtelRunExporter(run.manifest.id, figures, run.results, otlp_endpoint=endpoint)
    pushed = exporter.flush()
    exporter.shutdown()
    err.print(f"{'pushed' if pushed else 'could not push'} the figures to {endpoint} (OTLP)",
              highlight=False)


def _serve(run: Run, figures: list[Figure], gate: Any, host: str, port: int, err: Any) -> None:
    from prometheus_client import CollectorRegistry, start_http_server

    from exporters.prometheus_export import register_run

    registry = CollectorRegistry()
    register_run(registry, run.manifest.id, figures, _thresholds(gate),
                 gate.verdict if gate is not None else None,
                 time.time() if gate is not None else None)
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise click.BadParameter(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                                 param_hint="--serve") from exc
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    err.print(f"serving {len(figures)} figures of run {run.manifest.id} on "
              f"http://{host}:{server.server_port}/metrics (Ctrl-C to stop)", highlight=False)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
