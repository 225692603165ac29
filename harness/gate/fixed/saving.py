"""A candidate's saving on the leaderboard: one scale for every candidate, the share of the
baseline's serving cost the candidate eliminates. Its RER by default; where a capacity
sweep of the candidate exists (`layergate capacity`), 1 − 1/capacity ratio: the baseline
serves 1/ratio of the candidate's load at the SLO, so that share of its cost per request
is saved (a ratio of 2 saves 0.5, as an RER of 0.5 halves the time per token)."""

from __future__ import annotations

from dataclasses import dataclass

from layergate.exporters.catalogue import CAPACITY_RATIO, RER
from layergate.exporters.figures import Figure


@dataclass(frozen=True)
class Estimate:
    """A figure's value and interval, as leaderboards and comparisons lay them side by side."""

    value: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, figure: Figure | None) -> Estimate:
        if figure is None:
            return cls(None, None, None)
        return cls(figure.value, figure.ci_low, figure.ci_high)


@dataclass(frozen=True)
class Saving:
    source: str  # RER or CAPACITY_RATIO: what it was measured as
    measured: Estimate  # as measured (the RER, or the capacity ratio)
    estimate: Estimate  # on the one scale (a share of the baseline's cost)
    # what the measured interval is, where its figure says (a single capacity sweep's:
    # that sweep's sampling noise only), shown beside it wherever the saving is
    interval: str | None = None

    @property
    def key(self) -> float:
        """What saves the most ranks first; none ranks last."""
        return self.estimate.value if self.estimate.value is not None else float("-inf")


def saving_of(rer: Figure | None, capacity_ratio: Figure | None = None) -> Saving:
    """The saving from the capacity ratio when there is one, else from the RER."""
    if capacity_ratio is None:
        measured = Estimate.of(rer)
        return Saving(RER, measured, measured)
    measured = Estimate.of(capacity_ratio)
    label = (capacity_ratio.detail or {}).get("interval")
    return Saving(CAPACITY_RATIO, measured,
                  Estimate(*(_share(x) for x in (measured.value, measured.low, measured.high))),
                  label if isinstance(label, str) else None)


def _share(ratio: float | None) -> float | None:
    return 1 - 1 / ratio if ratio is not None and ratio > 0 else None
