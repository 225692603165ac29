"""Candidates compared with each other on their saving: paired differences and the set of
candidates not worse than the best (multiple comparisons with the best, Hsu 1984).

Every candidate of a run is bootstrapped on the same resamples of the same requests (one
seed, one aligned request set) with its own process draw, so resample b of candidate i and
of candidate j are a pair: their difference carries the requests' shared noise once and
both processes' offsets. Intervals here are on the saving's own scale (a share of the
baseline's cost) at the family-wise level 1 - alpha.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

import numpy as np


@dataclass(frozen=True)
class Difference:
    """Saving of `first` minus that of `second`, with its paired interval."""

    first: str
    second: str
    value: float
    low: float | None
    high: float | None
    confidence: float


def _finite_quantile(x: np.ndarray, q: float) -> float | None:
    kept = x[np.isfinite(x)]
    if kept.size == 0 or kept.size * 2 < x.size:  # mostly undefined: no interval
        return None
    return float(np.quantile(kept, q))


def paired_differences(points: dict[str, float], boots: dict[str, np.ndarray],
                       alpha: float) -> list[Difference]:
    """Every pair's difference, each interval at 1 - alpha / (pairs) (Bonferroni over the
    pairs, so all hold together at 1 - alpha)."""
    names = [n for n in points if n in boots]
    pairs = list(combinations(names, 2))
    if not pairs:
        return []
    level = 1 - alpha / len(pairs)
    out = []
    for a, b in pairs:
        d = boots[a] - boots[b]
        out.append(Difference(a, b, points[a] - points[b],
                              _finite_quantile(d, (1 - level) / 2),
                              _finite_quantile(d, (1 + level) / 2), level))
    return out


def not_worse_than_best(points: dict[str, float], boots: dict[str, np.ndarray],
                        alpha: float) -> tuple[str, ...]:
    """The candidates that may be the best at 1 - alpha (Hsu's constrained MCB with a
    bootstrap critical value): i stays when, for every j, s_i - s_j + c_i >= 0, c_i the
    1 - alpha quantile over resamples of max_j of (s_j - s_i)'s resampled deviation."""
    names = [n for n in points if n in boots and math.isfinite(points[n])]
    if len(names) < 2:
        return tuple(names)
    kept = []
    for i in names:
        others = [j for j in names if j != i]
        dev = np.stack([(boots[j] - boots[i]) - (points[j] - points[i]) for j in others])
        worst = np.max(dev, axis=0)
        c = _finite_quantile(worst, 1 - alpha)
        if c is None or all(points[i] - points[j] + c >= 0 for j in others):
            kept.append(i)
    return tuple(kept)


def selected_bounds(points: dict[str, float], boots: dict[str, np.ndarray],
                    alpha: float) -> dict[str, tuple[float | None, float | None]]:
    """Simultaneous intervals over every candidate (max-t over the resamples, two-sided at
    1 - alpha): whichever one the data select, its interval holds at 1 - alpha, so the
    chosen one's lower end is not the optimism of the maximum of several."""
    names = [n for n in points if n in boots]
    if not names:
        return {}
    sd = {n: float(np.nanstd(boots[n])) for n in names}
    if any(not math.isfinite(s) or s <= 0 for s in sd.values()):
        return {n: (None, None) for n in names}
    t = np.stack([np.abs(boots[n] - points[n]) / sd[n] for n in names])
    q = _finite_quantile(np.max(t, axis=0), 1 - alpha)
    if q is None:
        return {n: (None, None) for n in names}
    return {n: (points[n] - q * sd[n], points[n] + q * sd[n]) for n in names}
