"""Distribution-free statistics that are not sums: quantiles with CIs, and the paired
Wilcoxon signed-rank test with its effect size. numpy only (no scipy at run time)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def _z(confidence: float) -> float:
    # inverse normal CDF by bisection on erf: exact enough, no scipy
    target = (1 + confidence) / 2
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def quantiles_ci(values: np.ndarray, qs: tuple[float, ...], confidence: float,
                 reorder: bool = False) -> list[tuple[float | None, float | None, float | None]]:
    """(quantile, ci_low, ci_high) per q, NaNs ignored: the point as numpy's default
    (linear) quantile, the CI from order statistics (the binomial interval for a
    quantile): distribution-free, where a bootstrap would sort per resample. CI bounds
    that fall outside the sample are None. Only the order statistics these read are put in
    place (one partition, not a sort: the same values, in linear time); `reorder`: in
    `values` itself (the caller's to reorder), not in a copy, when all are finite."""
    finite = np.isfinite(values)
    # a copy (partitioned in place, not copied again) unless the caller lets them move
    x = values if reorder and finite.all() else values[finite]
    n = x.size
    if n == 0:
        return [(None, None, None)] * len(qs)
    z = _z(confidence)
    plans = []
    for q in qs:
        pos = q * (n - 1)
        i = int(math.floor(pos))
        half = z * math.sqrt(n * q * (1 - q))
        lo, hi = math.floor(n * q - half), math.ceil(n * q + half)  # 1-based ranks
        plans.append((pos, i, min(i + 1, n - 1), lo, hi))
    x.partition(sorted({k for _, i, j, lo, hi in plans
                        for k in (i, j, lo - 1, hi - 1) if 0 <= k < n}))
    out = []
    for pos, i, j, lo, hi in plans:
        point = float(x[i] + (x[j] - x[i]) * (pos - i))
        out.append((point, float(x[lo - 1]) if lo >= 1 else None,
                    float(x[hi - 1]) if hi <= n else None))
    return out


def quantile_ci(values: np.ndarray, q: float, confidence: float
                ) -> tuple[float | None, float | None, float | None]:
    return quantiles_ci(values, (q,), confidence)[0]


@dataclass(frozen=True)
class PairedTest:
    """Wilcoxon signed-rank test on paired differences (zeros dropped)."""

    n: int  # non-zero differences
    statistic: float  # W = min(W+, W-), as scipy reports it (two-sided)
    p_value: float
    effect_size: float  # matched-pairs rank-biserial correlation, (W+ - W-) / (W+ + W-)
    method: str  # "exact" | "normal"


def _average_ranks(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ranks 1..n of `a` with ties averaged, and the tie group sizes."""
    uniq, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    mean_rank = ends - (counts - 1) / 2.0
    return mean_rank[inverse], counts


def _exact_cdf(n: int) -> np.ndarray:
    """P(W+ <= w) for w = 0..n(n+1)/2 under H0, no ties."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1
    for k in range(1, n + 1):
        counts[k:] = counts[k:] + counts[:-k].copy()
    return np.cumsum(counts) / 2.0 ** n


def wilcoxon(diffs: np.ndarray) -> PairedTest | None:
    """Two-sided test that the differences are symmetric around 0; None with no data.

    Matches scipy.stats.wilcoxon's defaults: exact distribution for n <= 50 without ties,
    else the normal approximation with tie correction and no continuity correction.
    """
    d = np.asarray(diffs, dtype=float)
    d = d[np.isfinite(d) & (d != 0)]
    n = d.size
    if n == 0:
        return None
    ranks, ties = _average_ranks(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    w_minus = float(ranks[d < 0].sum())
    total = n * (n + 1) / 2
    effect = (w_plus - w_minus) / total
    stat = min(w_plus, w_minus)
    if n <= 50 and not np.any(ties > 1):
        cdf = _exact_cdf(n)
        w = int(round(stat))
        p = min(1.0, 2 * cdf[w])
        return PairedTest(n, stat, float(p), float(effect), "exact")
    mean = total / 2
    var = n * (n + 1) * (2 * n + 1) / 24 - float((ties ** 3 - ties).sum()) / 48
    if var <= 0:
        return PairedTest(n, stat, 1.0, float(effect), "normal")
    z = (stat - mean) / math.sqrt(var)
    p = math.erfc(abs(z) / math.sqrt(2))
    return PairedTest(n, stat, float(min(1.0, p)), float(effect), "normal")
