"""Lai's scale-invariant t-mixture: an exact confidence sequence for the mean of i.i.d.
near-Gaussian observations with unknown variance, valid from the second observation
(T. L. Lai, "On confidence sequences", Ann. Statist. 1976; restated by Wang and Ramdas,
"Anytime-valid t-tests and confidence sequences for Gaussian means with unknown variance",
2023). With a N(0, tau^2) mixture over the standardised effect, the likelihood ratio of the
scale-invariant statistic is

    M_n(mu) = (1 + n tau^2)^(-1/2) * (1 - a r^2)^(-n/2),   a = n tau^2 / (1 + n tau^2),
    r^2 = d^2 / (s^2 + d^2),   d = mean_n - mu,   s^2 = biased sample variance,

and {mu : M_n(mu) < 1/alpha} is the interval mean_n +- s * sqrt(K / (1 - K)) with
K = (1 - (alpha^2 / (1 + n tau^2))^(1/n)) / a (the whole line while K >= 1, e.g. n = 1).
Exact when the observations are i.i.d. Gaussian (Ville's inequality on a nonnegative
martingale); `tau2` only moves where the width is spent (`t_mixture_tau2` makes it tightest
at `n_opt`). Used for log latency ratios: per live window (`layergate watch`) and per
request (`layergate gate --sequential`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from layergate.exporters.figures.sequential.bound import SequenceBound
from layergate.exporters.figures.sequential.bound import check_alpha as _check_alpha


def t_factor(n: int, alpha: float, tau2: float) -> float:
    """The multiplier of the (biased) sample standard deviation at n observations; inf
    while the mixture cannot exclude anything yet."""
    _check_alpha(alpha)
    if tau2 <= 0:
        raise ValueError(f"need tau2 > 0, got {tau2}")
    if n < 2:
        return math.inf
    a = n * tau2 / (1 + n * tau2)
    k = -math.expm1(math.log(alpha * alpha / (1 + n * tau2)) / n) / a
    return math.inf if k >= 1 else math.sqrt(k / (1 - k))


@lru_cache(maxsize=256)
def t_mixture_tau2(alpha: float, n_opt: int) -> float:
    """The mixture width that makes the interval tightest at `n_opt` observations (a
    golden-section search on log tau^2; the factor is unimodal in it)."""
    _check_alpha(alpha)
    if n_opt < 2:
        raise ValueError(f"need n_opt >= 2, got {n_opt}")
    lo, hi = math.log(1e-4), math.log(1e4)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        m1, m2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if t_factor(n_opt, alpha, math.exp(m1)) < t_factor(n_opt, alpha, math.exp(m2)):
            hi = m2
        else:
            lo = m1
    return math.exp((lo + hi) / 2)


def windows_needed(gap: float, sd: float, alpha: float, n_opt: int, limit: int = 10_000
                   ) -> int | None:
    """How many observations of spread `sd` (biased sample sd) the t-mixture needs before
    its half-width falls below `gap`, the distance between the true mean and a threshold:
    the number of windows a decision takes. None past `limit`."""
    if gap <= 0 or sd < 0:
        raise ValueError(f"need gap > 0 and sd >= 0, got gap={gap}, sd={sd}")
    tau2 = t_mixture_tau2(alpha, n_opt)
    for n in range(2, limit + 1):
        if sd * t_factor(n, alpha, tau2) < gap:
            return n
    return None


def t_mean_sequence(values: np.ndarray | list[float], alpha: float = 0.05,
                    n_opt: int = 10) -> SequenceBound:
    """The interval for the mean after the last of `values` (i.i.d., near-Gaussian)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("values must be a non-empty 1-D sequence of finite numbers")
    mean = float(x.mean())
    half = float(x.std()) * t_factor(x.size, alpha, t_mixture_tau2(alpha, n_opt))
    if math.isnan(half):  # inf * 0: n >= 2 identical values under a factor of inf
        half = math.inf
    return SequenceBound(int(x.size), mean, mean - half, mean + half)


def t_mean_path(values: np.ndarray, alpha: float = 0.05, n_opt: int = 10
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, low, high) after each of `values`, for simulations."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("values must be a non-empty 1-D sequence")
    n = np.arange(1, x.size + 1, dtype=float)
    mean = np.cumsum(x) / n
    sd = np.sqrt(np.maximum(np.cumsum(x * x) / n - mean * mean, 0.0))
    tau2 = t_mixture_tau2(alpha, n_opt)
    factor = np.array([t_factor(int(k), alpha, tau2) for k in n])
    with np.errstate(invalid="ignore"):
        half = np.where(np.isinf(factor), np.inf, sd * np.where(np.isinf(factor), 0, factor))
    return mean, mean - half, mean + half
