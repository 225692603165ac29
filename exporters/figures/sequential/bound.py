"""What every confidence sequence here returns, and how a sequence is watched.

A path is three arrays, (estimate, low, high) after each observation in arrival order; the
last look is one `SequenceBound`. Because a confidence sequence holds at every n at once,
the running intersection of its intervals holds too: `intersected` keeps the tightest
bounds seen since the first look, so a threshold once excluded stays excluded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SequenceBound:
    """The anytime-valid interval after `n` observations."""

    n: int
    estimate: float
    low: float
    high: float

    def excludes(self, value: float) -> bool:
        return not self.low <= value <= self.high


def check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"need 0 < alpha < 1, got alpha={alpha}")


def intersected(low: np.ndarray, high: np.ndarray, looks: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """The running intersection of the intervals at the `looks` (a boolean mask: the
    observations after which someone may act, e.g. once a minimum count is reached);
    (-inf, inf) before the first look."""
    low = np.where(looks, np.nan_to_num(low, nan=-np.inf), -np.inf)
    high = np.where(looks, np.nan_to_num(high, nan=np.inf), np.inf)
    return np.maximum.accumulate(low), np.minimum.accumulate(high)
