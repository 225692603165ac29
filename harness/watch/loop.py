"""`run_watch(config)`: read a window from Prometheus every `window_s`, decide, run the
hooks, publish, until the rollout passes, rolls back, runs out of time or of data.

Window k covers [start + k * window_s, start + (k + 1) * window_s]; it is read `lag_s`
after its end (so the last scrape inside it has been stored), at its end. A loop that fell
more than a window behind (a slow Prometheus, a long hook) skips ahead rather than reading
stale windows in a burst.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from exporters.canary import Window
from harness.watch.board import Board
from harness.watch.config import WatchConfig
from harness.watch.exposition import WatchCollector
from harness.watch.hooks import HookResult, Hooks
from harness.watch.metric_map import EngineMetrics, load_engine_metrics, normalise_selector
from harness.watch.policy import WatchPolicy, load_watch_policy
from harness.watch.server import serve
from harness.watch.source import PrometheusSource
from harness.watch.stages import NO_DATA_EXIT, StageMachine, StagePlan, Transition, WatchStatus


@dataclass(frozen=True)
class WatchOutcome:
    status: WatchStatus
    board: Board
    hook_error: str | None = None  # a hook that failed: the rollout's state is unknown

    @property
    def exit_code(self) -> int:
        return NO_DATA_EXIT if self.hook_error is not None else self.status.exit_code


@dataclass(frozen=True)
class Prepared:
    """Everything checked before the first window: usage errors surface here."""

    config: WatchConfig
    policy: WatchPolicy
    engine: EngineMetrics
    selectors: dict[str, str]
    plan: StagePlan
    machine: StageMachine


def prepare(config: WatchConfig) -> Prepared:
    """Load and check the policy, the mapping and the selectors. Raises PolicyError,
    MetricMapError or ValueError (all usage errors) naming what is wrong."""
    policy = load_watch_policy(config.policy)
    engine = load_engine_metrics(config.engine, config.metric_names)
    selectors = {"baseline": normalise_selector(config.baseline, "--baseline"),
                 "candidate": normalise_selector(config.candidate, "--candidate")}
    if selectors["baseline"] == selectors["candidate"]:
        raise ValueError("--baseline and --candidate select the same series: the watch would "
                         "compare an arm with itself")
    plan = StagePlan(config.stages, config.min_windows, config.max_windows,
                     config.no_data_windows)
    machine = StageMachine(policy, plan, engine.roles, engine.engine)
    return Prepared(config, policy, engine, selectors, plan, machine)


Say = Callable[[str], None]


def run_watch(prepared: Prepared, say: Say | None = None,
              stop: threading.Event | None = None,
              on_window: Callable[[Board], None] | None = None) -> WatchOutcome:
    """Watch until a verdict; with `serve_port`, keep answering until `stop` is set."""
    config, machine = prepared.config, prepared.machine
    say = say or (lambda _msg: None)
    stop = stop or threading.Event()
    board = Board(prepared.plan, machine.status, machine.alpha)
    registry = CollectorRegistry()
    registry.register(WatchCollector(board))
    server = serve(board, registry, config.host, config.serve_port) \
        if config.serve_port is not None else None
    source = PrometheusSource(config.prometheus, prepared.engine, prepared.selectors,
                              config.min_requests)
    hooks = Hooks(config.on_advance, config.on_rollback, config.hook_timeout_s, say)
    outcome = WatchOutcome(machine.status, board)
    try:
        if server is not None:
            say(f"serving /status, /metrics and /flagger/* on "
                f"http://{config.host}:{server.server_address[1]}")
        try:
            outcome = _loop(prepared, source, board, hooks, say, stop, on_window)
        except KeyboardInterrupt:  # Ctrl-C: stop as SIGTERM does, with what was decided
            stop.set()
            outcome = WatchOutcome(board.snapshot().status, board)
        if server is not None and not stop.is_set():
            say(f"verdict {outcome.status.verdict}; still serving it (Ctrl-C to stop)")
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
    finally:
        source.close()
        if server is not None:
            server.shutdown()
            server.server_close()
    return outcome


def _loop(prepared: Prepared, source: PrometheusSource, board: Board, hooks: Hooks,
          say: Say, stop: threading.Event,
          on_window: Callable[[Board], None] | None) -> WatchOutcome:
    config, machine = prepared.config, prepared.machine
    probe = source.probe()
    if isinstance(probe, dict):
        for arm, count in probe.items():
            say(f"{arm}: {{{prepared.selectors[arm]}}} matches {count} series now"
                + ("" if count else " (none yet: no data until it does)"))
    else:
        say(f"warning: {probe.reason}")
    window = config.window_s
    end = time.time() + window
    status = machine.status
    while not stop.is_set():
        if stop.wait(max(0.0, end + config.lag_s - time.time())):
            break
        got = source.window(end, window)
        if isinstance(got, Window):
            status, transition = machine.step(got)
        else:
            status, transition = machine.step(None, got.reason)
        board.update(status, transition)
        say(describe(status))
        if on_window is not None:
            on_window(board)
        if transition is not None:
            result = hooks.run(transition)
            error = _hook_error(transition, result)
            if error is not None:
                return WatchOutcome(status, board, error)
        if status.verdict != "pending":
            return WatchOutcome(status, board)
        end += window
        if end + config.lag_s < time.time() - window:  # fell behind: skip, do not burst
            end = time.time()
    return WatchOutcome(status, board)


def _hook_error(t: Transition, result: HookResult | None) -> str | None:
    if result is None or result.ok:
        return None
    how = "timed out" if result.returncode is None else f"exited {result.returncode}"
    tail = result.output.strip()[-2000:]
    return (f"--on-{t.decision} {how} after the watch decided to {t.decision} at stage "
            f"{t.stage:g} %; the traffic share is now unknown. Command: {result.command}"
            + (f"\n{tail}" if tail else ""))


def describe(s: WatchStatus) -> str:
    """One line per window, for the terminal."""
    head = f"stage {s.stage:g} % window {s.windows}: {s.state}"
    if s.state == "no_data":
        return f"{head} ({s.missing} in a row): {s.no_data_reason}"
    parts = []
    for f in s.figures:
        c = f.check
        if c.value is None or not c.critical:
            continue
        interval = "" if c.ci_low is None else f" [{c.ci_low:.3g}, {c.ci_high:.3g}]"
        parts.append(f"{c.name} {c.value:.3g}{interval} {c.direction} {c.threshold:g} "
                     f"{c.status}")
    line = head + ("  " + "; ".join(parts) if parts else "")
    if s.verdict != "pending" or s.reasons:
        line += "\n  " + "\n  ".join(s.reasons)
    return line
