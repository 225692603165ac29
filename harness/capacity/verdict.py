"""The gate on a capacity sweep (`layergate capacity`'s directory): its catalogued figures
(exporters/capacity.py) under a policy, like a replay's. The per-step pass rule already
weighed each arm's errors and saturation, so the fail-closed checks are the sweep's
completeness only (an overloaded step's errors are its result, not a broken run)."""

from __future__ import annotations

from pathlib import Path

from harness.capacity.config import CapacityConfig
from harness.capacity.report import sweep_figures
from harness.gate.policy import Policy
from harness.gate.result import GateResult
from harness.gate.verdict import apply_policy
from harness.rundir import RunDirError
from harness.sweepdir import KIND, StateError, SweepDir


def evaluate_sweep(path: str | Path, policy: Policy) -> GateResult:
    """The verdict on the sweep in `path`; a RunDirError when it cannot be read."""
    sweep = SweepDir(path)
    try:
        state = sweep.read()
        stored = dict(state.config)
        stored["out"], stored["resume"] = Path(stored["out"]), False
        if stored.get("traffic") is not None:
            stored["traffic"] = Path(stored["traffic"])
        config = CapacityConfig(**stored)
    except (StateError, TypeError, ValueError) as exc:
        raise RunDirError(f"{sweep.path}: cannot read the capacity sweep: {exc}") from exc
    manifest = {"id": sweep.path.name, "kind": KIND, "status": state.status, "arms": {}}
    return apply_policy(policy, sweep_figures(state, config), manifest, [], sweep.path)
