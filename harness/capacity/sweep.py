"""`run_capacity(config) -> SweepState`: step every arm along the ladder through the
replayer, store each step as it completes, and end with the report.

Each step is one replay (`run_replay`) of the same requests (the traffic's records in
order, cycled, ids `c000000`, ... at every step) at the same intended times (open loop: one
seeded Poisson process, scaled to the step's rate) to every arm still stepping at that
load, so the arms are paired step by step. The first `warmup` seconds of a step are sent
but not counted. A KeyboardInterrupt (Ctrl-C, SIGTERM) leaves the sweep `interrupted` with
the steps so far and their report; `--resume` sends the step that was in flight again
from its start (its partial run is kept as `steps/NNN.interrupted`) and goes on.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.console import Console

from layergate.exporters.catalogue import COMPLETE, INTERRUPTED, PASS, RUNNING
from layergate.exporters.figures.capacity_step import StepArm, step_arms
from layergate.exporters.traffic import TrafficRecord, read_traffic, write_traffic
from layergate.harness import scenarios
from layergate.harness.capacity.config import RATE, USERS, CapacityConfig
from layergate.harness.capacity.idle import IdleCheck, IdleWait
from layergate.harness.capacity.ladder import next_step
from layergate.harness.capacity.live import SweepMetrics
from layergate.harness.capacity.report import build_report, sweep_figures
from layergate.harness.interrupts import raise_if_interrupted
from layergate.harness.manifest import now_iso
from layergate.harness.replay.config import ConfigError, ReplayConfig
from layergate.harness.replay.runner import run_replay
from layergate.harness.report.capacity_plots import write_frontier
from layergate.harness.rundir import RunDir
from layergate.harness.sweepdir import Step, SweepDir, SweepState

POOL = 1000  # records drawn from a mix, then cycled
# what --resume takes from this invocation: where the arms are now, the bounds, the display
RESUMED_FROM_CALL = ("out", "arms", "models", "max_requests", "max_time", "progress",
                     "preflight_timeout", "processes", "resume", "metrics_port",
                     "metrics_linger_s", "bind_host")


@dataclasses.dataclass(frozen=True)
class StepReplay(ReplayConfig):
    """A step's replay: only the arms still stepping at its load."""

    required_arms: ClassVar[tuple[str, ...]] = ()


def _source(config: CapacityConfig) -> list[TrafficRecord]:
    if config.scenario is not None:
        return scenarios.build_traffic(config.scenario, requests=POOL, seed=config.seed)
    records = list(read_traffic(config.traffic).records)
    if not records:
        raise ConfigError(f"{config.traffic}: no request to send")
    return records


def step_seed(seed: int, index: int) -> int:
    """The arrival stream of step `index`: its own (one stream rescaled at every step
    would repeat the same bursts at every load, so their noise would not average out)."""
    return seed * 100_003 + index


def step_records(source: list[TrafficRecord], n: int, load: float, mode: str,
                 seed: int) -> list[TrafficRecord]:
    """The first n requests of the sweep's one sequence, timed for `load` by the arrival
    stream `seed` (`step_seed`)."""
    offsets = scenarios.poisson_offsets(n, load, seed) if mode == RATE else [0.0] * n
    return [dataclasses.replace(source[i % len(source)], id=f"c{i:06d}", offset_s=round(o, 6))
            for i, o in enumerate(offsets)]


def step_size(config: CapacityConfig, load: float, state: SweepState) -> int:
    """Records per arm: the warm-up, then --min-requests and --min-duration's worth."""
    if config.load == RATE:
        rate = load
    else:  # closed loop: the rate the nearest step carried, per user
        near = [r for s in state.steps for r in s.results if r.window_s > 0]
        per_user = max((r.n / r.window_s / r.load for r in near), default=None)
        rate = load * per_user if per_user else None
    # closed loop: each user sends two measured requests at least, so that they queue
    least = config.min_requests if config.load == RATE else max(config.min_requests,
                                                                 int(2 * load))
    if rate is None:
        return least + int(2 * load)
    # a bisection step (inside an arm's bracket) decides the interpolated knee: measured
    # longer, its attainment's noise moves the capacity less
    longer = config.knee_steps if near_knee(load, state, config) else 1.0
    return math.ceil(rate * config.warmup) + math.ceil(
        longer * max(least, math.ceil(rate * config.min_duration)))


def near_knee(load: float, state: SweepState, config: CapacityConfig) -> bool:
    """Whether `load` lies inside some arm's bracket [last pass, first fail]."""
    by_arm: dict[str, list] = {}
    for r in state.arm_steps():
        by_arm.setdefault(r.arm, []).append(
            (r.load, r.passes(config.slo_attainment, config.max_error_rate)))
    for outcomes in by_arm.values():
        failed = [x for x, ok in outcomes if not ok]
        if failed and any(x < load for x, ok in outcomes if ok) and load < min(failed):
            return True
    return False


def resumed(config: CapacityConfig, stored: dict) -> CapacityConfig:
    keep = {k: v for k, v in stored.items() if k not in RESUMED_FROM_CALL}
    given = {k: getattr(config, k) for k in RESUMED_FROM_CALL}
    keep["traffic"] = None if keep["traffic"] is None else Path(keep["traffic"])
    if config.slo and config.slo != stored["slo"]:
        raise ConfigError(f"--resume: the sweep's SLO is {stored['slo']!r}, not {config.slo!r}")
    return CapacityConfig(**{**keep, **given})


def run_capacity(config: CapacityConfig, echo: Callable[[str], None] | None = None
                 ) -> tuple[SweepState, CapacityConfig]:
    """Run (or, with --resume, continue) the sweep; returns its final state and the
    settings it ran with (a resume's: the stored ones, with this call's arms and bounds)."""
    echo = echo or Console(stderr=True, soft_wrap=True).print
    sweep = SweepDir(config.out)
    if sweep.exists():
        if not config.resume:
            raise ConfigError(f"{sweep.path} already holds a sweep: pass --resume to go on, "
                              "or choose another --out")
        state = sweep.read()
        config = resumed(config, state.config)
        state.resumes.append({"at": now_iso(), "arms": config.arms})
        state.status = RUNNING
    else:
        if config.traffic is None and config.scenario is None:
            raise ConfigError(f"--resume: {sweep.path} holds no sweep and there is nothing "
                              "to start one from: give --traffic or --scenario")
        if not config.slo:
            raise ConfigError("--slo is needed to start a sweep (e.g. ttft:2s,tpot:150ms)")
        state = SweepState(config.to_json())
    source = _source(config)
    sweep.write(state)
    live = None
    if config.metrics_port:
        live = SweepMetrics(config.metrics_port, config.bind_host, sweep.path.name,
                            config.slo_attainment, config.max_error_rate)
        echo(f"live metrics: http://{config.bind_host}:{config.metrics_port}/metrics")
    try:
        _ladder(config, sweep, state, source, echo, live)
        state.status = COMPLETE
    except KeyboardInterrupt:
        state.status = INTERRUPTED
        raise
    finally:
        sweep.write(state)
        report = build_report(state, config)
        sweep.write_json(sweep.report_path, report)
        write_frontier(report, sweep.path)
        if live is not None:
            if state.status == COMPLETE:  # one scrape interval for the final figures
                time.sleep(config.metrics_linger_s)
            live.close()
    return state, config


def _ladder(config: CapacityConfig, sweep: SweepDir, state: SweepState,
            source: list[TrafficRecord], echo: Callable[[str], None],
            live: SweepMetrics | None) -> None:
    preflight = config.preflight_timeout
    idle = IdleCheck(config.arms, config.models, source[0], config.idle_timeout,
                     idle_s=state.idle_s) if config.idle_timeout > 0 else None
    while True:
        raise_if_interrupted()
        outcomes = {arm: [] for arm in config.arms}
        for r in state.arm_steps():
            outcomes.setdefault(r.arm, []).append(
                (r.load, r.passes(config.slo_attainment, config.max_error_rate)))
        load, arms, state.done = next_step(outcomes, config)
        if load is None:
            return
        n = step_size(config, load, state)
        bound = _bound(config, state, load, n * len(arms))
        if bound:
            state.notes.append(bound)
            echo(f"capacity: {bound}")
            return
        index = len(state.steps)
        waited = _await_idle(idle, arms, echo)
        began = time.monotonic()
        results = _run_step(config, sweep, source, index, load, arms, n, preflight)
        preflight = 0.0  # the arms answered once: later steps do not ask again
        step = Step(index, load, arms, n, time.monotonic() - began, tuple(results),
                    None if waited is None else waited.seconds,
                    () if waited is None else waited.busy)
        state.steps.append(step)
        sweep.write(state)
        echo(_step_line(step, config))
        if live is not None:
            live.update(state.steps, sweep_figures(state, config))


def _await_idle(idle: IdleCheck | None, arms: tuple[str, ...],
                echo: Callable[[str], None]) -> IdleWait | None:
    if idle is None:
        return None
    if not all(a in idle.idle_s for a in arms):  # the first step: learn the idle times
        idle.learn(tuple(a for a in arms if a not in idle.idle_s))
        return IdleWait(0.0)
    waited = idle.wait(arms)
    if waited.busy:
        echo(f"capacity: {waited.text()}")
    return waited


def _bound(config: CapacityConfig, state: SweepState, load: float, sending: int) -> str:
    if state.sent + sending > config.max_requests:
        return (f"the next step ({load:g} {config.unit}, {sending} requests) would pass "
                f"--max-requests {config.max_requests} ({state.sent} sent)")
    if state.seconds >= config.max_time:
        return f"--max-time {config.max_time:g}s spent ({state.seconds:.0f}s stepping)"
    return ""


def _run_step(config: CapacityConfig, sweep: SweepDir, source: list[TrafficRecord],
              index: int, load: float, arms: tuple[str, ...], n: int,
              preflight: float) -> list[StepArm]:
    out = sweep.step_dir(index)
    if out.exists():
        # the step in flight when the sweep stopped: a step is one stretch of steady load,
        # so it is sent again from its start; the partial run stays beside for reading
        out.rename(_unused(out.with_name(f"{out.name}.interrupted")))
    traffic = sweep.step_traffic(index)
    traffic.parent.mkdir(parents=True, exist_ok=True)
    write_traffic(traffic, step_records(source, n, load, config.load,
                                        step_seed(config.seed, index)))
    replay = StepReplay(
        out=out, arms={a: config.arms[a] for a in arms},
        models={a: m for a, m in config.models.items() if a in arms}, traffic=traffic,
        users=int(load) if config.load == USERS else None,
        max_in_flight=config.max_in_flight, timeout=config.timeout, seed=config.seed,
        processes=config.processes, preflight_timeout=preflight, progress=config.progress,
        metrics_linger_s=0.0)
    run_replay(replay)
    return read_step(out, load, config)


def _unused(path: Path) -> Path:
    candidate, k = path, 1
    while candidate.exists():
        k += 1
        candidate = path.with_name(f"{path.name}-{k}")
    return candidate


def read_step(out: Path, load: float, config: CapacityConfig) -> list[StepArm]:
    """The arms of one stored step, judged against the sweep's SLO."""
    step = RunDir(out)
    with step.open_store(create=False) as store:
        rows = store.rows()
    sent_at = {r.result.request_id: r.intended_at for r in rows if r.intended_at is not None}
    # the limit the step's replay set and recorded (None: a closed-loop step)
    limit = step.read_manifest().in_flight_limit
    return step_arms([r.result for r in rows], sent_at, load, config.parsed_slo,
                     config.warmup, limit)


def _step_line(step: Step, config: CapacityConfig) -> str:
    words = []
    for r in step.results:
        verdict = PASS if r.passes(config.slo_attainment, config.max_error_rate) else \
            f"fail ({r.why_not(config.slo_attainment, config.max_error_rate)})"
        words.append(f"{r.arm} {verdict}, attainment {r.attainment:.3f}, "
                     f"goodput {r.goodput:.3g}/s")
    return (f"step {step.index}: {step.load:g} {config.unit}, {step.requests} requests, "
            f"{step.seconds:.0f}s: " + "; ".join(words))
