"""The release gate: a policy (YAML) applied to a run's figures gives pass / fail /
inconclusive, fail-closed, with a staged-rollout recommendation.

`evaluate` is imported lazily so that policy validation works without the metric
calculators loaded (and keeps `import layergate.harness.gate` cheap).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from layergate.harness.gate.checks import Check
from layergate.harness.gate.fixed.recommendation import Rollout
from layergate.harness.gate.fixed.result import GateResult
from layergate.harness.gate.fixed.verdict import apply_policy, decide
from layergate.harness.gate.policy import MetricRule, Policy, PolicyError, load_policy

if TYPE_CHECKING:
    from layergate.harness.gate.fixed.evaluation import evaluate, evaluate_run

__all__ = ["Check", "GateResult", "MetricRule", "Policy", "PolicyError",
           "Rollout", "apply_policy", "decide", "evaluate", "evaluate_run", "load_policy"]


def __getattr__(name: str) -> Any:
    if name in ("evaluate", "evaluate_run"):
        from layergate.harness.gate.fixed import evaluation

        return getattr(evaluation, name)
    raise AttributeError(f"module 'layergate.harness.gate' has no attribute {name!r}")
