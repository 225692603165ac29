"""The gate on a capacity sweep (`layergate capacity`'s directory): its catalogued figures
(exporters/figures/capacity.py) under a policy, like a replay's. The per-step pass rule already
weighed each arm's errors and saturation, so the fail-closed checks are the sweep's
completeness only (an overloaded step's errors are its result, not a broken run). A
sweep's capacity ratio is also a candidate's saving on a run's leaderboard
(`gate RUN --capacity NAME=SWEEP`). `SWEEPS` hands these readers to the gate's
`gate_dir`: the gate sits below this room and does not import it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from layergate.exporters.catalogue import BASELINE, CANDIDATE, CAPACITY_RATIO, COMPLETE, RUNNING
from layergate.exporters.figures import Figure
from layergate.harness.capacity.config import CapacityConfig
from layergate.harness.capacity.replicates import is_replicated
from layergate.harness.capacity.report import off_the_verdict, sweep_figures
from layergate.harness.gate import GateResult, Policy, Sweeps, apply_policy
from layergate.harness.rundir import RunDirError
from layergate.harness.sweepdir import KIND, StateError, SweepDir, SweepState


def _read(sweep: SweepDir) -> tuple[SweepState, list[Figure]]:
    """The sweep's state and figures; a RunDirError when it cannot be read."""
    try:
        state = sweep.read()
        stored = dict(state.config)
        stored["out"], stored["resume"] = Path(stored["out"]), False
        if stored.get("traffic") is not None:
            stored["traffic"] = Path(stored["traffic"])
        config = CapacityConfig(**stored)
    except (StateError, TypeError, ValueError) as exc:
        raise RunDirError(f"{sweep.path}: cannot read the capacity sweep: {exc}") from exc
    return state, sweep_figures(state, config)


def evaluate_sweep(path: str | Path, policy: Policy) -> GateResult:
    """The verdict on the sweep in `path`; a RunDirError when it cannot be read."""
    sweep = SweepDir(path)
    state, figures = _read(sweep)
    manifest = {"id": sweep.path.name, "kind": KIND, "status": state.status, "arms": {}}
    # a single sweep's ratio interval is shown, never judged (`off_the_verdict`)
    return apply_policy(policy, [off_the_verdict(f) for f in figures], manifest, [],
                        sweep.path)


def evaluate_replicates(path: str | Path, policy: Policy) -> GateResult:
    """The verdict on replicate sweeps (`capacity --replicates`): the capacity ratio with
    its interval across the replicates; incomplete while a replicate is."""
    import json

    from layergate.exporters.catalogue import OVERALL
    from layergate.harness.capacity.replicates import REPORT

    path = Path(path)
    try:
        report = json.loads((path / REPORT).read_text())
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path / REPORT}: cannot read the replicates' report: {exc}") \
            from exc
    ratio = report.get(CAPACITY_RATIO)
    rows = report.get("replicates") or []
    if ratio is None:
        fig = Figure(CAPACITY_RATIO, None, CANDIDATE, OVERALL, status="not_computable",
                     reason=report.get("why", "no interval across replicates"))
    else:
        fig = Figure(CAPACITY_RATIO, ratio["value"], CANDIDATE, OVERALL, ratio["ci_low"],
                     ratio["ci_high"], n=ratio["replicates"], noise_floor=1.0,
                     detail={"excess": ratio["value"] - 1, "excess_floor": "1 (replicates)",
                             "excess_ci": [ratio["ci_low"] - 1, ratio["ci_high"] - 1],
                             "replicates": rows, "unit": "ratio"})
    done = all(SweepDir(path / r["dir"]).exists() and
               SweepDir(path / r["dir"]).read().status == COMPLETE for r in rows)
    manifest = {"id": path.name, "kind": "capacity-replicates",
                "status": COMPLETE if done and rows else RUNNING, "arms": {}}
    return apply_policy(policy, [fig], manifest, [], path)


def capacity_ratio(path: str | Path) -> Figure:
    """The candidate's capacity ratio in the sweep in `path` (a sweep takes one candidate,
    the arm `candidate`), with the sweep's baseline URL as `detail["baseline"]`; a
    RunDirError when it is not a readable sweep or has none."""
    sweep = SweepDir(path)
    if not sweep.exists():
        raise RunDirError(f"{sweep.path}: not a capacity sweep (`layergate capacity` writes "
                          "one)")
    state, figures = _read(sweep)
    found = next((f for f in figures if f.name == CAPACITY_RATIO and f.arm == CANDIDATE), None)
    if found is None:
        raise RunDirError(f"{sweep.path}: the sweep has no capacity ratio of its candidate "
                          "(it needs a step of the baseline and of the candidate)")
    baseline = (state.config.get("arms") or {}).get(BASELINE)
    return dataclasses.replace(found, detail={**found.detail, BASELINE: baseline})


SWEEPS = Sweeps(replicated=is_replicated, replicates=evaluate_replicates, sweep=evaluate_sweep,
                ratio=capacity_ratio)
