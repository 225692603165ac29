"""Betting confidence sequences for the mean of bounded observations: exact at every n, for
any distribution on [lo, hi], rare events included (Waudby-Smith and Ramdas, "Estimating
means of bounded random variables by betting", JRSS B 2024: hedged capital with the
predictable plug-in bets, their eqs. 26-27).

For a candidate mean m, two gamblers bet on x_i - m (rescaled to [0, 1]) with stakes fixed
before x_i is seen:

    K+_n(m) = prod (1 + l+_i(m) (x_i - m)),   K-_n(m) = prod (1 - l-_i(m) (x_i - m)),
    l_i = sqrt(2 log(2 / alpha) / (s2_{i-1} i log(1 + i))),  l+ = min(l, c / m),
    l- = min(l, c / (1 - m)),  c = 3/4,

with s2 the running (regularised) variance. Under mean = m both are nonnegative martingales
from 1, so by Ville's inequality the hedged capital max(K+ / 2, K- / 2) ever reaches 1/alpha
with probability <= alpha: {m : it has not} is a confidence sequence. K+ growing says the
mean is above m, K- below. Exact match (a Bernoulli per request), termination accuracy and
their excess over the noise floor (a difference in [-1, 1]) use it.
"""

from __future__ import annotations

import math

import numpy as np

from layergate.exporters.figures.sequential.bound import SequenceBound, check_alpha, intersected

TRUNCATION = 0.75  # c, the largest stake as a share of what a bet can lose (paper: 1/2, 3/4)
GRID = 401  # candidate means per path, beside the thresholds a caller asks about


def _bets(x01: np.ndarray, alpha: float) -> np.ndarray:
    """The predictable plug-in stake before each observation (before truncation)."""
    n = np.arange(1, x01.size + 1, dtype=float)
    mu = (0.5 + np.cumsum(x01)) / (n + 1)
    mu_before = np.concatenate(([0.5], mu[:-1]))
    s2 = (0.25 + np.cumsum((x01 - mu_before) ** 2)) / (n + 1)
    s2_before = np.concatenate(([0.25], s2[:-1]))
    return np.sqrt(2 * math.log(2 / alpha) / (s2_before * n * np.log1p(n)))


def log_capital(values: np.ndarray, means: np.ndarray, lo: float, hi: float,
                alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """log K+ and log K- (n x len(means)) after each of `values` in [lo, hi], for each
    candidate mean."""
    check_alpha(alpha)
    if not hi > lo:
        raise ValueError(f"need lo < hi, got [{lo}, {hi}]")
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("values must be a non-empty 1-D sequence of finite numbers")
    if np.any((x < lo) | (x > hi)):
        raise ValueError(f"values must lie in [{lo}, {hi}], got {x.min()} to {x.max()}")
    x01 = (x - lo) / (hi - lo)
    m = np.clip((np.asarray(means, dtype=float) - lo) / (hi - lo), 1e-12, 1 - 1e-12)
    bet = _bets(x01, alpha)[:, None]
    d = x01[:, None] - m[None, :]
    up = np.minimum(bet, TRUNCATION / m[None, :])
    down = np.minimum(bet, TRUNCATION / (1 - m[None, :]))
    return np.cumsum(np.log1p(up * d), axis=0), np.cumsum(np.log1p(-down * d), axis=0)


def rejected(values: np.ndarray, means: np.ndarray, lo: float, hi: float,
             alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(above, below), n x len(means): whether the hedged capital has reached 1/alpha at
    each look with the evidence that the mean is above (K+) or below (K-) each candidate."""
    up, down = log_capital(values, means, lo, hi, alpha)
    bar = math.log(2 / alpha)  # max(K+ / 2, K- / 2) >= 1 / alpha
    return up >= bar, down >= bar


def bounded_mean_path(values: np.ndarray, lo: float, hi: float, alpha: float = 0.05,
                      looks: np.ndarray | None = None, grid: int = GRID
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, low, high) after each of `values`: the hull of the candidate means on a
    grid of `grid` points over [lo, hi] never rejected at the `looks` so far (default:
    every observation); each bound is widened to the next grid point, so the grid only
    costs width, never coverage."""
    x = np.asarray(values, dtype=float)
    means = np.linspace(lo, hi, grid)
    above, below = rejected(x, means, lo, hi, alpha)
    looks = np.ones(x.size, dtype=bool) if looks is None else np.asarray(looks, dtype=bool)
    out = np.logical_or.accumulate((above | below) & looks[:, None], axis=0)
    inside = ~out
    any_in = inside.any(axis=1)
    first = np.where(any_in, inside.argmax(axis=1), 0)
    last = np.where(any_in, grid - 1 - inside[:, ::-1].argmax(axis=1), 0)
    step = (hi - lo) / (grid - 1)
    low = np.where(any_in, np.maximum(means[first] - step, lo), np.nan)
    high = np.where(any_in, np.minimum(means[last] + step, hi), np.nan)
    estimate = np.cumsum(x) / np.arange(1, x.size + 1)
    low, high = intersected(low, high, np.ones(x.size, dtype=bool))
    return estimate, low, high


def bounded_mean_sequence(values: np.ndarray, lo: float, hi: float, alpha: float = 0.05
                          ) -> SequenceBound:
    """The interval after the last of `values` (every observation looked at)."""
    est, low, high = bounded_mean_path(values, lo, hi, alpha)
    return SequenceBound(int(est.size), float(est[-1]), float(low[-1]), float(high[-1]))
