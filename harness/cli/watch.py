"""`layergate watch`: gate a staged rollout live from Prometheus.

Exit codes as `gate`'s: 0 pass (every stage advanced: promote), 1 fail (rolled back),
2 usage error, 3 inconclusive (a stage ran out of windows undecided), 4 no data or
infrastructure (Prometheus unreachable, selectors matching nothing, an arm without traffic,
or a hook that failed).
"""

from __future__ import annotations

import json
import re
import signal
import threading
from dataclasses import fields
from pathlib import Path
from typing import Any

import click

from harness.watch.config import WatchConfig

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class Duration(click.ParamType):
    """`60s`, `5m`, `1.5s`, `500ms`, or seconds as a bare number."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            seconds = float(value)
        else:
            m = _DURATION.match(str(value))
            if m is None:
                self.fail(f"{value!r} is not a duration (e.g. 60s, 5m, 500ms)", param, ctx)
            seconds = float(m.group(1)) * _UNITS[m.group(2)]
        if seconds <= 0:
            self.fail(f"{value!r} must be longer than 0", param, ctx)
        return seconds


def _stages(ctx: click.Context, param: click.Parameter, value: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in value.split(",") if x.strip())
    except ValueError as exc:
        raise click.BadParameter(f"{value!r}: expected percentages separated by commas, "
                                 "e.g. 1,5,25,50,100") from exc


@click.command("watch")
@click.option("--prometheus", required=True, metavar="URL",
              help="Prometheus that scrapes both arms, e.g. http://prometheus:9090.")
@click.option("--baseline", required=True, metavar="SELECTOR",
              help="Label matchers picking the baseline's series, e.g. 'arm=\"baseline\"' or "
                   "'job=\"vllm-stable\",namespace=\"prod\"'.")
@click.option("--candidate", required=True, metavar="SELECTOR",
              help="Label matchers picking the canary's series.")
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Watch policy YAML (live figures, thresholds, alpha). Default: "
                   "scenarios/watch/no-regression.yaml.")
@click.option("--engine", default=WatchConfig.engine, show_default=True,
              help="Whose metric names to read: a key of the mapping file (layergate, "
                   "layergate-replay, vllm, tgi).")
@click.option("--metric-names", type=click.Path(dir_okay=False, path_type=Path),
              help="Mapping file of engine -> role -> metric name. Default: "
                   "scenarios/watch/metric-names.yaml.")
@click.option("--stages", default=",".join(f"{s:g}" for s in WatchConfig.stages),
              show_default=True, callback=_stages,
              help="Percent of traffic on the candidate at each stage; every stage below 100 "
                   "is watched, reaching 100 is the promotion.")
@click.option("--window", "window_s", type=Duration(), default=f"{WatchConfig.window_s:g}s",
              show_default=True,
              help="Length of one window; at least 4 scrape intervals.")
@click.option("--min-windows", type=click.IntRange(1), default=WatchConfig.min_windows,
              show_default=True,
              help="Windows with data a stage needs before it may advance.")
@click.option("--max-windows", type=click.IntRange(1), default=WatchConfig.max_windows,
              show_default=True,
              help="Windows with data after which an undecided stage is inconclusive.")
@click.option("--no-data-windows", type=click.IntRange(1),
              default=WatchConfig.no_data_windows, show_default=True,
              help="Windows in a row without data after which the watch ends (exit 4).")
@click.option("--min-requests", type=click.IntRange(1), default=WatchConfig.min_requests,
              show_default=True,
              help="Requests each arm must serve in a window for it to count.")
@click.option("--lag", "lag_s", type=Duration(), default=f"{WatchConfig.lag_s:g}s",
              show_default=True,
              help="How long after a window's end to read it (a scrape interval or so).")
@click.option("--on-advance", metavar="CMD",
              help="Shell command run once when a stage is decided good; "
                   "$LAYERGATE_WATCH_NEXT_STAGE is the share to set.")
@click.option("--on-rollback", metavar="CMD",
              help="Shell command run once when the canary is decided worse.")
@click.option("--hook-timeout", "hook_timeout_s", type=Duration(),
              default=f"{WatchConfig.hook_timeout_s:g}s",
              show_default=True, help="A hook still running after this has failed.")
@click.option("--serve", "serve_port", type=click.IntRange(0, 65535),
              help="Also answer on this port: /metrics, /status (Argo Rollouts web metric) "
                   "and /flagger/<hook> (Flagger webhooks); keeps serving the verdict until "
                   "stopped.")
@click.option("--host", default=WatchConfig.host, show_default=True,
              help="Address --serve binds.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the final state (verdict, stages, figures, reasons) as JSON.")
def command(policy_path: Path | None, json_path: Path | None, **options: Any) -> None:
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

    Exit codes: 0 pass, 1 rolled back, 2 usage error, 3 inconclusive, 4 no data or a
    failed hook.
    """
    from rich.console import Console

    from harness.gate import PolicyError
    from harness.watch.loop import prepare, run_watch
    from harness.watch.metric_map import MetricMapError

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    names = {f.name for f in fields(WatchConfig)}
    config = WatchConfig(policy=policy_path, **{k: v for k, v in options.items() if k in names})
    try:
        prepared = prepare(config)
    except PolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from exc
    except (MetricMapError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    err.print(f"watching {config.candidate} against {config.baseline} on {config.prometheus} "
              f"({config.engine} names, policy {prepared.policy.name}, stages "
              f"{', '.join(f'{s:g}' for s in prepared.plan.analysed)} %, window "
              f"{config.window_s:g} s, alpha {prepared.policy.alpha:g} over the rollout, "
              f"{prepared.machine.alpha:.2g} per stage and figure)")
    try:
        outcome = run_watch(prepared, say=err.print, stop=stop)
    except MetricMapError as exc:
        raise click.UsageError(str(exc)) from exc
    if outcome.status.verdict == "pending":
        err.print("[yellow]stopped before a verdict[/]")
    if outcome.hook_error:
        err.print(f"[bold red]error:[/] {outcome.hook_error}")
    err.print(f"verdict: [bold]{outcome.status.verdict}[/] (exit {outcome.exit_code})")
    if json_path is not None:
        _write_json(json_path, outcome)
        err.print(f"wrote {json_path}")
    raise SystemExit(outcome.exit_code)


def _write_json(path: Path, outcome: Any) -> None:
    body = {**outcome.board.to_json(), "hook_error": outcome.hook_error,
            "exit_code": outcome.exit_code}
    try:
        path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise click.BadParameter(f"cannot write {path}: {exc.strerror or exc}",
                                 param_hint="--json") from exc
