"""`run_watch(config)`: read a window from Prometheus every `window_s`, decide, run the
hooks, publish, until the rollout passes, rolls back, runs out of time or of data.

Windows lie on a grid of multiples of `window_s`; each is read `lag_s` after its end (so
the last scrape inside it has been stored), at its end. A loop that fell behind (a slow
Prometheus, a long hook, a restart from `--state`) reads the windows it missed in turn:
Prometheus stores them, and a late read at a window's end sees what a timely one would.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from layergate.exporters.catalogue import BASELINE, CANDIDATE, FAIL, PENDING
from layergate.exporters.figures.canary import Window
from layergate.harness.watch.board import Board, Missing
from layergate.harness.watch.config import WatchConfig
from layergate.harness.watch.exposition import WatchCollector
from layergate.harness.watch.flagger import WeightReading
from layergate.harness.watch.hooks import HookResult, Hooks
from layergate.harness.watch.journal import Journal
from layergate.harness.watch.metric_map import (
    EngineMetrics,
    MetricMapError,
    load_engine_metrics,
    normalise_selector,
)
from layergate.harness.watch.policy import WatchPolicy, load_watch_policy
from layergate.harness.watch.server import serve
from layergate.harness.watch.source import NoData, PrometheusSource
from layergate.harness.watch.stages import (
    NO_DATA_EXIT,
    StageMachine,
    StagePlan,
    Transition,
    WatchStatus,
)


@dataclass(frozen=True)
class WatchOutcome:
    status: WatchStatus
    board: Board
    hook_error: str | None = None  # a hook that failed: the rollout's state is unknown

    @property
    def exit_code(self) -> int:
        return NO_DATA_EXIT if self.hook_error is not None else self.status.exit_code

    def to_json(self) -> dict[str, Any]:
        """The final state `watch --json` writes: the board, a failed hook, the exit code."""
        return {**self.board.to_json(), "hook_error": self.hook_error,
                "exit_code": self.exit_code}


@dataclass(frozen=True)
class Prepared:
    """Everything checked before the first window: usage errors surface here."""

    config: WatchConfig
    policy: WatchPolicy
    engine: EngineMetrics
    selectors: dict[str, str]
    plan: StagePlan
    machine: StageMachine
    journal: Journal

    def new_machine(self) -> StageMachine:
        return StageMachine(self.policy, self.plan, self.engine.roles, self.engine.engine)


def identity(config: WatchConfig, policy: WatchPolicy, selectors: dict[str, str]
             ) -> dict[str, Any]:
    """What makes a state file this rollout's: any difference and it is refused."""
    rules = {r.name: f"{r.direction} {r.threshold:g}" + ("" if r.critical else " shown")
             + ("" if r.required else " optional") for r in policy.rules}
    raw = {BASELINE: selectors[BASELINE], CANDIDATE: selectors[CANDIDATE],
           "engine": config.engine, "stages": list(config.stages),
           "window_s": config.window_s, "min_windows": config.min_windows,
           "max_windows": config.max_windows, "no_data_windows": config.no_data_windows,
           "min_requests": config.min_requests, "policy.alpha": policy.alpha,
           "policy.inconclusive": policy.inconclusive, "policy.metrics": rules}
    return json.loads(json.dumps(raw))  # as it reads back from the file


def first_window_end(now: float, window: float) -> float:
    """Windows lie on a grid of multiples of the window length, so two watches (or one
    restarted) read the same windows."""
    return (math.floor(now / window) + 1) * window


def prepare(config: WatchConfig) -> Prepared:
    """Load and check the policy, the mapping, the selectors and the state file. Raises
    PolicyError, MetricMapError, StagePlanError or StateFileError (all usage errors)
    naming what is wrong."""
    policy = load_watch_policy(config.policy)
    engine = load_engine_metrics(config.engine, config.metric_names)
    selectors = {BASELINE: normalise_selector(config.baseline, f"--{BASELINE}"),
                 CANDIDATE: normalise_selector(config.candidate, f"--{CANDIDATE}")}
    if selectors[BASELINE] == selectors[CANDIDATE]:
        raise MetricMapError("--baseline and --candidate select the same series: the watch would "
                         "compare an arm with itself")
    plan = StagePlan(config.stages, config.min_windows, config.max_windows,
                     config.no_data_windows)
    machine = StageMachine(policy, plan, engine.roles, engine.engine)
    journal = Journal.open(config.state, identity(config, policy, selectors),
                           first_window_end(time.time(), config.window_s))
    return Prepared(config, policy, engine, selectors, plan, machine, journal)


Say = Callable[[str], None]


def run_watch(prepared: Prepared, say: Say | None = None,
              stop: threading.Event | None = None,
              on_window: Callable[[Board], None] | None = None) -> WatchOutcome:
    """Watch until a verdict; with `serve_port`, keep answering (and start over when
    Flagger names a new revision) until `stop` is set."""
    config = prepared.config
    say = say or (lambda _msg: None)
    stop = stop or threading.Event()
    board = Board(prepared.new_machine, prepared.journal, say)
    if prepared.journal.inputs:
        say(f"resumed from {config.state}: {len(prepared.journal.inputs)} windows of "
            f"revision {prepared.journal.revision or '(none named yet)'}, "
            f"{describe(board.snapshot().status)}")
    registry = CollectorRegistry()
    registry.register(WatchCollector(board))
    server = serve(board, registry, config.host, config.serve_port) \
        if config.serve_port is not None else None
    source = PrometheusSource(config.prometheus, prepared.engine, prepared.selectors,
                              config.min_requests)
    hooks = Hooks(config.on_advance, config.on_rollback, prepared.journal,
                  config.hook_timeout_s, say)
    outcome = WatchOutcome(board.snapshot().status, board)
    try:
        if server is not None:
            say(f"serving /status, /metrics and /flagger/* on "
                f"http://{config.host}:{server.port}")
        try:
            outcome = _resume_hooks(board, hooks, config, say) or \
                _loop(prepared, source, board, hooks, say, stop, on_window,
                      serving=server is not None)
        except KeyboardInterrupt:  # Ctrl-C: stop as SIGTERM does, with what was decided
            stop.set()
            outcome = WatchOutcome(board.snapshot().status, board)
        if server is not None and not stop.is_set():
            say(f"verdict {outcome.status.verdict}; still serving it (Ctrl-C to stop)")
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
            outcome = WatchOutcome(board.snapshot().status, board, outcome.hook_error)
    finally:
        source.close()
        if server is not None:
            server.stop()
    return outcome


def _resume_hooks(board: Board, hooks: Hooks, config: WatchConfig, say: Say
                  ) -> WatchOutcome | None:
    """After a restart: run a transition's hook that never started, report one that
    started but never finished (rerun or fail, by --on-unfinished-hook), and end again on
    one recorded as failed."""
    status = board.snapshot().status
    for t in board.snapshot().transitions:
        state = hooks.journal.hook_state(t.key)
        if hooks.unfinished(t):
            say(f"--on-{t.decision} for stage {t.stage:g} -> {t.next_stage:g} was started "
                "but never recorded as finished (the watch stopped while it ran)")
            if config.on_unfinished_hook == FAIL:
                return WatchOutcome(status, board, (
                    f"--on-{t.decision} for stage {t.stage:g} % may or may not have run to "
                    "the end; the traffic share is unknown. Check it, then restart with "
                    "--on-unfinished-hook rerun to run it again"))
            hooks.journal.hook(t.key, "rerun")
        elif state is not None and state["state"] == "done" and state.get("returncode") != 0:
            return WatchOutcome(status, board, f"--on-{t.decision} for stage {t.stage:g} % "
                                f"failed before the restart (exit {state.get('returncode')})")
        error = _hook_error(t, hooks.run(t))
        if error is not None:
            return WatchOutcome(status, board, error)
    return None


def _loop(prepared: Prepared, source: PrometheusSource, board: Board, hooks: Hooks,
          say: Say, stop: threading.Event, on_window: Callable[[Board], None] | None,
          serving: bool) -> WatchOutcome:
    config, journal = prepared.config, prepared.journal
    probe = source.probe()
    if isinstance(probe, dict):
        for arm, count in probe.items():
            say(f"{arm}: {{{prepared.selectors[arm]}}} matches {count} series now"
                + ("" if count else " (none yet: no data until it does)"))
    else:
        say(f"warning: {probe.reason}")
    window = config.window_s
    # resume on the grid after the last window recorded; missed windows are read late
    # from Prometheus, at their own end, so they hold what a timely read would have
    if journal.inputs:
        end = journal.inputs[-1]["end"] + window
    else:
        end = journal.data["origin"] or first_window_end(time.time(), window)
    epoch = board.epoch
    while not stop.is_set():
        if stop.wait(max(0.0, end + config.lag_s - time.time())):
            break
        if board.epoch != epoch:  # a new revision: its first window starts now
            epoch, end = board.epoch, first_window_end(time.time(), window)
            continue
        status = board.snapshot().status
        if status.verdict != PENDING:
            if not serving:
                return WatchOutcome(status, board)
            # keep serving the verdict until a new revision, and keep reading the weight:
            # a grant lost at the last step is granted again only from a newer reading
            got = source.window(end, window)
            reading = _observation(source, config, got, end, window)[1]
            if reading is not None:
                board.read_weight(reading, epoch=epoch)
            end += window
            continue
        got = source.window(end, window)
        status, transition = board.observe(*_observation(source, config, got, end, window),
                                           epoch=epoch)
        say(describe(status))
        if on_window is not None:
            on_window(board)
        if transition is not None:
            error = _hook_error(transition, hooks.run(transition))
            if error is not None:
                return WatchOutcome(status, board, error)
        if status.verdict != PENDING and not serving:
            return WatchOutcome(status, board)
        end += window
    return WatchOutcome(board.snapshot().status, board)


def _observation(source: PrometheusSource, config: WatchConfig, got: Window | NoData,
                 end: float, window: float) -> tuple[Window | Missing, WeightReading | None]:
    """The window (or why it has none) and the controller's weight as of its end: the
    exported weight (and its lowest over the window) when --controller-weight names it,
    else the candidate's share."""
    reading = None
    if config.controller_weight:
        value = source.controller_weight(config.controller_weight, end, window)
        if value is not None:
            reading = WeightReading(value[0], value[1], "controller", value[2])
    if reading is None and isinstance(got, Window):  # also when the series is missing
        reading = WeightReading(source.share(got), end - window, "observed")
    elif reading is None and got.arm == CANDIDATE:
        reading = WeightReading(0.0, end - window, "observed")
    if isinstance(got, Window):
        return got, reading
    return Missing(end, got.reason, got.arm == CANDIDATE), reading


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
    if s.held:  # the last window was served below the stage's weight
        head += (f" ({s.held} windows served at {s.held_at:g} %, below the stage: not "
                 "counted; waiting for the controller to step)")
    if s.no_data_reason is not None:  # the last window had no data
        count = f"{s.missing} in a row" if s.missing else \
            f"the candidate has not served yet, {s.waiting} windows"
        line = f"{head} ({count}): {s.no_data_reason}"
        return line + ("\n  " + "\n  ".join(s.reasons) if s.verdict != PENDING else "")
    parts = []
    for f in s.figures:
        c = f.check
        if c.value is None or not c.critical:
            continue
        interval = "" if c.ci_low is None else f" [{c.ci_low:.3g}, {c.ci_high:.3g}]"
        parts.append(f"{c.name} {c.value:.3g}{interval} {c.direction} {c.threshold:g} "
                     f"{c.status}")
    line = head + ("  " + "; ".join(parts) if parts else "")
    if s.verdict != PENDING or s.reasons:
        line += "\n  " + "\n  ".join(s.reasons)
    return line
