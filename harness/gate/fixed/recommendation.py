"""The gate's staged-rollout recommendation, from RRR = (RER - target RER) / target RER.

The stage follows the *lower* end of RRR's interval, so a noisy win earns less exposure;
a failed run is never rolled out and an inconclusive one stays internal. Stage names,
labels and default bounds are the catalogue's (layergate.exporters.catalogue.STAGES); a policy may
move the bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from layergate.exporters.catalogue import (
    CANDIDATE,
    FAIL,
    INTERNAL,
    NO_ROLLOUT,
    PASS,
    RER,
    STAGE_LABELS,
    stage_for,
)
from layergate.exporters.figures import OVERALL, Figure
from layergate.harness.gate.policy import Policy


@dataclass(frozen=True)
class Rollout:
    stage: str
    reason: str
    rrr: float | None = None
    rrr_low: float | None = None
    rrr_high: float | None = None
    target_rer: float | None = None

    @property
    def label(self) -> str:
        return STAGE_LABELS[self.stage]


def recommend(verdict: str, figures: list[Figure], policy: Policy) -> Rollout:
    target = policy.target_rer
    rer = next((f for f in figures if f.name == RER and f.arm == CANDIDATE
                and f.scenario == OVERALL and f.status == "ok" and f.value is not None), None)
    if rer is None:
        stage = NO_ROLLOUT if verdict == FAIL else INTERNAL
        reason = ("the gate failed" if verdict == FAIL else
                  "no usable RER figure (not computed, or too few samples): internal use only")
        return Rollout(stage, reason, target_rer=target)
    rrr = (rer.value - target) / target
    low = (rer.ci_low - target) / target if rer.ci_low is not None else rrr
    high = (rer.ci_high - target) / target if rer.ci_high is not None else rrr
    if verdict == FAIL:
        return Rollout(NO_ROLLOUT, "the gate failed", rrr, low, high, target)
    if verdict != PASS:
        return Rollout(INTERNAL, "inconclusive: gather more evidence before wider exposure",
                       rrr, low, high, target)
    bounds = ", ".join(f"{STAGE_LABELS[name]} >= {bound:g}"
                       for name, bound in policy.rollout.items())
    reason = (f"RRR lower bound {low:+.2f} (RER {rer.value:.3f} against target {target:.2f}); "
              f"stage bounds {bounds}")
    return Rollout(stage_for(low, policy.rollout), reason, rrr, low, high, target)
