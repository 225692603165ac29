"""The release gate: a policy (YAML) applied to a run's figures gives pass / fail /
inconclusive, fail-closed, with a staged-rollout recommendation.

`evaluate` is imported lazily so that policy validation works without the metric
calculators loaded (and keeps `import harness.gate` cheap).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.gate.checks import Check
from harness.gate.policy import MetricRule, Policy, PolicyError, load_policy
from harness.gate.recommendation import Rollout
from harness.gate.result import GateResult
from harness.gate.verdict import apply_policy, decide

if TYPE_CHECKING:
    from harness.gate.evaluation import evaluate, evaluate_run

__all__ = ["Check", "GateResult", "MetricRule", "Policy", "PolicyError",
           "Rollout", "apply_policy", "decide", "evaluate", "evaluate_run", "load_policy"]


def __getattr__(name: str) -> Any:
    if name in ("evaluate", "evaluate_run"):
        from harness.gate import evaluation

        return getattr(evaluation, name)
    raise AttributeError(f"module 'harness.gate' has no attribute {name!r}")
