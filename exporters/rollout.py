"""Rollout stage from RRR = (RER - target) / target (target: MetricsConfig.target_rer).

| RRR               | stage         | reading                                   |
| ----------------- | ------------- | ----------------------------------------- |
| < 0               | internal      | below the target                          |
| [0, 0.25)         | vip           | meets the target                          |
| [0.25, 0.5)       | public_5pct   | beats it by a quarter                     |
| >= 0.5            | full          | beats it by half or more                  |

The bounds are the gate policy's default `rollout` bounds (harness/gate/policy.py), so
the figure and the gate's recommendation agree unless a policy moves them.

The stage is taken from the lower CI bound of RRR when there is one (roll out only as
far as the evidence supports); the point estimate's stage is in detail too. Quality is
the gate's business: this figure says what the saving alone would justify.
"""

from __future__ import annotations

from exporters.config import MetricsConfig
from exporters.figures import Figure

STAGES = ("internal", "vip", "public_5pct", "full")
_EDGES = (0.0, 0.25, 0.5)


def stage(rrr: float) -> str:
    return STAGES[sum(rrr >= e for e in _EDGES)]


def figures(rer: list[Figure], config: MetricsConfig) -> list[Figure]:
    """One `rrr` figure per `rer` figure of the candidate."""
    t = config.target_rer
    out = []
    for f in rer:
        if f.name != "rer" or f.arm != "candidate":
            continue
        value = None if f.value is None else (f.value - t) / t
        low = None if f.ci_low is None else (f.ci_low - t) / t
        high = None if f.ci_high is None else (f.ci_high - t) / t
        detail = {"target_rer": t}
        if value is not None:
            detail |= {"stage": stage(low if low is not None else value),
                       "stage_point": stage(value),
                       "stage_index": STAGES.index(stage(low if low is not None else value))}
        out.append(Figure("rrr", value, "candidate", f.scenario, low, high, f.n, f.status,
                          f.reason, detail=detail))
    return out
