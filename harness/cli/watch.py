"""`layergate watch`: gate a staged rollout live from Prometheus.

Exit codes as `gate`'s: 0 pass (every stage advanced: promote), 1 fail (rolled back),
2 usage error (also a --state file written for another rollout), 3 inconclusive (a stage
ran out of windows undecided), 4 no data or infrastructure (Prometheus unreachable,
selectors matching nothing, an arm without traffic, a hook that failed, or one a restart
found unfinished under --on-unfinished-hook fail).
"""

from __future__ import annotations

import re
import signal
import threading
from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import BASELINE, CANDIDATE, PENDING, ExitCode
from layergate.exporters.cli_options import config_values, field_option
from layergate.harness.cli.exits import exits
from layergate.harness.watch.config import WatchConfig

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def _duration(value: str) -> float:
    """`60s`, `5m`, `1.5s`, `500ms`, or seconds as a bare number."""
    m = _DURATION.match(str(value))
    if m is None:
        raise ValueError(f"{value!r} is not a duration (e.g. 60s, 5m, 500ms)")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if seconds <= 0:
        raise ValueError(f"{value!r} must be longer than 0")
    return seconds


def _seconds(value: float) -> str:
    return f"{value:g}s"


def _stages(value: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in value.split(",") if x.strip())
    except ValueError as exc:
        raise ValueError(f"{value!r}: expected percentages separated by commas, "
                         "e.g. 1,5,25,50,100") from exc


def _option(name: str, *flags: str, **attrs: Any):
    return field_option(WatchConfig, name, *flags, **attrs)


def _duration_option(name: str, flag: str):
    return _option(name, flag, parse=_duration, show=_seconds, metavar="DURATION")


@exits(ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE, ExitCode.INCONCLUSIVE,
       ExitCode.INFRASTRUCTURE, PASS="pass (every stage advanced: promote)", FAIL="rolled back",
       USAGE="usage error, or a --state file of another rollout",
       INFRASTRUCTURE="no data, a failed hook, or one left unfinished by a restart")
@click.command("watch")
@_option("prometheus", required=True, metavar="URL")
@_option(BASELINE, required=True, metavar="SELECTOR")
@_option(CANDIDATE, required=True, metavar="SELECTOR")
@_option("policy", type=click.Path(dir_okay=False, path_type=Path))
@_option("engine")
@_option("metric_names", type=click.Path(dir_okay=False, path_type=Path))
@_option("stages", parse=_stages, show=lambda s: ",".join(f"{x:g}" for x in s),
         metavar="P[,P...]")
@_duration_option("window_s", "--window")
@_option("min_windows")
@_option("max_windows")
@_option("no_data_windows")
@_option("min_requests")
@_duration_option("lag_s", "--lag")
@_option("on_advance", metavar="CMD")
@_option("on_rollback", metavar="CMD")
@_duration_option("hook_timeout_s", "--hook-timeout")
@_option("serve_port", "--serve", metavar="PORT")
@_option("host")
@_option("controller_weight", metavar="PROMQL")
@_option("state", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE")
@_option("on_unfinished_hook")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the final state (verdict, stages, figures, reasons) as JSON.")
@click.pass_context
def command(ctx: click.Context, json_path: Path | None, **_: Any) -> None:
    """Gate a staged rollout live: compare the canary with the baseline serving beside it,
    window by window, and advance, roll back or stop.

    Every WINDOW, each arm's own metrics over that window (both read for the same interval)
    give the live figures: latency ratios (E2E, TTFT, TPOT, as means from the histograms),
    the error-rate difference, TPOT-based RER, the prefix-cache hit-rate difference and the
    share of layers executed. Each has an anytime-valid interval over the stage's windows,
    so it may be looked at after every window. A critical figure whose interval lies wholly
    on the bad side of its threshold rolls back at once (--on-rollback); when every critical
    figure lies wholly on the good side after --min-windows, the stage advances
    (--on-advance, with the next stage). After --max-windows undecided: inconclusive.
    No data (Prometheus down, a selector matching nothing, an arm without traffic) is its
    own state and never a pass. Consistency and termination accuracy need both arms'
    answers to the same request: they stay with `layergate gate` on a shadow replay.
    """
    from rich.console import Console

    from layergate.harness.report import formats
    from layergate.harness.watch.loop import prepare, run_watch

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    config = WatchConfig(**config_values(ctx, WatchConfig))
    prepared = prepare(config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    err.print(f"watching {config.candidate} against {config.baseline} on {config.prometheus} "
              f"({config.engine} names, policy {prepared.policy.name}, stages "
              f"{', '.join(f'{s:g}' for s in prepared.plan.analysed)} %, window "
              f"{config.window_s:g} s, alpha {prepared.policy.alpha:g} over the rollout, "
              f"{prepared.machine.alpha:.2g} per stage and figure, latency intervals "
              f"widened by {prepared.machine.margin:.3f} in log ratio for process_spread "
              f"{prepared.policy.process_spread:g})")
    outcome = run_watch(prepared, say=err.print, stop=stop)
    if outcome.status.verdict == PENDING:
        err.print("[yellow]stopped before a verdict[/]")
    if outcome.hook_error:
        err.print(f"[bold red]error:[/] {outcome.hook_error}")
    err.print(f"verdict: [bold]{outcome.status.verdict}[/] (exit {outcome.exit_code})")
    formats.WATCH.write(outcome, {"json": json_path},
                        wrote=lambda path: err.print(f"wrote {path}"))
    raise SystemExit(outcome.exit_code)
