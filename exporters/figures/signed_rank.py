"""The Wilcoxon signed-rank interval for the centre of a symmetric distribution
(Hodges-Lehmann): exact, whatever the distribution's shape, from a handful of draws.

With R draws x_i, the R(R + 1) / 2 Walsh averages (x_i + x_j) / 2, i <= j, sorted, give the
interval [W_(k), W_(M + 1 - k)]: under symmetry about c, the number of Walsh averages below
c is the signed-rank statistic T of x - c, whose null distribution is that of a sum of a
random subset of 1..R. So the interval holds c with probability exactly 1 - 2 P(T <= k - 1),
k the largest for which that is at least the level asked (the level it reaches is kept:
0.961 for R = 8 at 0.95, the distribution being discrete). Its point is the Walsh
averages' median. Fewer than 6 draws cannot reach 0.95: [min, max] holds c with
probability 1 - 2 / 2^R (0.9375 at R = 5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SignedRankInterval:
    centre: float  # the Hodges-Lehmann estimate: the median of the Walsh averages
    low: float
    high: float
    level: float  # the exact coverage under symmetry, at least the level asked


def _null_cdf(n: int) -> np.ndarray:
    """P(T <= t) for t = 0 .. n(n + 1)/2, T the sum of a uniform random subset of 1..n."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    return np.cumsum(counts) / 2.0 ** n


def least_draws(confidence: float) -> int:
    """The fewest draws whose widest interval, [min, max], reaches `confidence`."""
    n = 1
    while 1 - 2 / 2 ** n < confidence:
        n += 1
    return n


def signed_rank_interval(xs: Sequence[float], confidence: float = 0.95
                         ) -> SignedRankInterval:
    n = len(xs)
    if n < least_draws(confidence):
        raise ValueError(f"signed_rank_interval: {n} draws cannot reach {confidence:g} "
                         f"(it needs {least_draws(confidence)})")
    x = np.asarray(xs, dtype=float)
    i, j = np.triu_indices(n)
    walsh = np.sort((x[i] + x[j]) / 2)
    cdf = _null_cdf(n)
    # the largest k with 1 - 2 P(T <= k - 1) >= confidence (k = 1: [min, max])
    k = 1 + int(np.sum(1 - 2 * cdf[1:walsh.size] >= confidence - 1e-12))
    return SignedRankInterval(float(np.median(walsh)), float(walsh[k - 1]),
                              float(walsh[-k]), float(1 - 2 * cdf[k - 1]))
