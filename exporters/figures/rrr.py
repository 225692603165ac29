"""The `rrr` figure: RRR = (RER - target) / target (target: MetricsConfig.target_rer), and
the rollout stage that saving alone would justify.

The stage comes from the catalogue's default bounds on RRR (layergate.exporters.catalogue.STAGES:
vip >= 0, public_5pct >= 0.25, full >= 0.5, internal below), the gate policy's defaults
too, so the figure and the gate's recommendation agree unless a policy moves them. It is
taken from the lower CI bound of RRR when there is one (roll out only as far as the
evidence supports); the point estimate's stage is in detail too. Quality is the gate's
business: this figure says what the saving alone would justify.
"""

from __future__ import annotations

from layergate.exporters.catalogue import CANDIDATE, RER, RRR, stage_for
from layergate.exporters.figures import Figure
from layergate.exporters.figures.config import MetricsConfig


def figures(rer: list[Figure], config: MetricsConfig) -> list[Figure]:
    """One `rrr` figure per `rer` figure of the candidate."""
    t = config.target_rer
    out = []
    for f in rer:
        if f.name != RER or f.arm != CANDIDATE:
            continue
        value = None if f.value is None else (f.value - t) / t
        low = None if f.ci_low is None else (f.ci_low - t) / t
        high = None if f.ci_high is None else (f.ci_high - t) / t
        detail = {"target_rer": t}
        if value is not None:
            detail |= {"stage": stage_for(low if low is not None else value),
                       "stage_point": stage_for(value)}
        out.append(Figure(RRR, value, CANDIDATE, f.scenario, low, high, f.n, f.status,
                          f.reason, detail=detail))
    return out
