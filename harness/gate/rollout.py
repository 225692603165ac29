"""Staged-rollout recommendation from RRR = (RER - target RER) / target RER.

The stage follows the *lower* end of RRR's interval, so a noisy win earns less exposure;
a failed run is never rolled out and an inconclusive one stays internal.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporters.figures import OVERALL, Figure
from harness.gate.policy import Policy

STAGES = ("none", "internal", "vip", "public_5pct", "full")
STAGE_LABELS = {"none": "do not roll out", "internal": "internal", "vip": "VIP",
                "public_5pct": "5 % public", "full": "full"}


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
    rer = next((f for f in figures if f.name == "rer" and f.arm == "candidate"
                and f.scenario == OVERALL and f.status == "ok" and f.value is not None), None)
    if rer is None:
        stage = "none" if verdict == "fail" else "internal"
        reason = ("the gate failed" if verdict == "fail" else
                  "no usable RER figure (not computed, or too few samples): internal use only")
        return Rollout(stage, reason, target_rer=target)
    rrr = (rer.value - target) / target
    low = (rer.ci_low - target) / target if rer.ci_low is not None else rrr
    high = (rer.ci_high - target) / target if rer.ci_high is not None else rrr
    if verdict == "fail":
        return Rollout("none", "the gate failed", rrr, low, high, target)
    if verdict != "pass":
        return Rollout("internal", "inconclusive: gather more evidence before wider exposure",
                       rrr, low, high, target)
    stages = policy.rollout
    if low >= stages.full:
        stage = "full"
    elif low >= stages.public_5pct:
        stage = "public_5pct"
    elif low >= stages.vip:
        stage = "vip"
    else:
        stage = "internal"
    reason = (f"RRR lower bound {low:+.2f} (RER {rer.value:.3f} against target {target:.2f}); "
              f"stage bounds vip >= {stages.vip:g}, 5 % public >= {stages.public_5pct:g}, "
              f"full >= {stages.full:g}")
    return Rollout(stage, reason, rrr, low, high, target)
