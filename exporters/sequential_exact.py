"""Exact confidence sequences for few looks: valid from the second observation, not
asymptotically.

`exporters/sequential.py`'s normal-mixture boundary is asymptotic: fine after dozens of
observations, poor at the handful of windows a live canary decides on, and poor for rare
events. Two closed forms here hold at every n, by Ville's inequality on a nonnegative
martingale:

- Means of near-Gaussian observations with unknown variance (e.g. the log of a window's
  latency ratio): Lai's scale-invariant mixture (T. L. Lai, "On confidence sequences",
  Ann. Statist. 1976; restated by Wang and Ramdas, "Anytime-valid t-tests and confidence
  sequences for Gaussian means with unknown variance", 2023). With a N(0, tau^2) mixture
  over the standardised effect, the likelihood ratio of the scale-invariant statistic is

      M_n(mu) = (1 + n tau^2)^(-1/2) * (1 - a r^2)^(-n/2),   a = n tau^2 / (1 + n tau^2),
      r^2 = d^2 / (s^2 + d^2),   d = mean_n - mu,   s^2 = biased sample variance,

  and {mu : M_n(mu) < 1/alpha} is the interval mean_n +- s * sqrt(K / (1 - K)) with
  K = (1 - (alpha^2 / (1 + n tau^2))^(1/n)) / a (the whole line while K >= 1, e.g. n = 1).
  Exact when the observations are i.i.d. Gaussian; `tau2` only moves where the width is
  spent (`t_mixture_tau2` makes it tightest at `n_opt`).
- Bernoulli rates (errors per request): the beta-binomial mixture (Robbins 1970; Howard,
  Ramdas, McAuliffe and Sekhon, Ann. Statist. 2021, sec. 3): with S events in n trials,
  {p : B(a + S, b + n - S) / B(a, b) / (p^S (1 - p)^(n - S)) < 1/alpha}. Exact for any p,
  including p near 0, where normal approximations fail.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from exporters.sequential import SequenceBound

JEFFREYS = (0.5, 0.5)  # the beta mixture's prior: no preference between rare and common


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise ValueError(f"need 0 < alpha < 1, got alpha={alpha}")


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


def binomial_sequence(events: float, trials: float, alpha: float = 0.05,
                      prior: tuple[float, float] = JEFFREYS) -> SequenceBound:
    """The interval for a Bernoulli rate after `events` in `trials` (counts may be
    fractional, as Prometheus's extrapolated increases are)."""
    _check_alpha(alpha)
    if trials < 0 or not 0 <= events <= trials:
        raise ValueError(f"need 0 <= events <= trials, got {events} of {trials}")
    if trials == 0:
        return SequenceBound(0, math.nan, 0.0, 1.0)
    a, b = prior
    s, f = events, trials - events
    # log of the mixture's marginal likelihood; the interval is where
    # log_marginal - log p^s (1 - p)^f < log(1 / alpha)
    log_marginal = (math.lgamma(a + s) + math.lgamma(b + f) - math.lgamma(a + b + trials)
                    - math.lgamma(a) - math.lgamma(b) + math.lgamma(a + b))
    bound = math.log(1 / alpha) - log_marginal

    def inside(p: float) -> bool:
        return -((s * math.log(p) if s else 0.0) + (f * math.log1p(-p) if f else 0.0)) < bound

    def edge(out: float, into: float) -> float:
        # convex in p with its minimum at the estimate: one crossing on each side
        for _ in range(48):
            mid = (out + into) / 2
            out, into = (out, mid) if inside(mid) else (mid, into)
        return into

    p_hat, tiny = s / trials, 1e-12
    low = 0.0 if inside(tiny) else edge(tiny, max(p_hat, 2 * tiny))
    high = 1.0 if inside(1 - tiny) else edge(1 - tiny, min(p_hat, 1 - 2 * tiny))
    return SequenceBound(int(round(trials)), p_hat, min(low, p_hat), max(high, p_hat))


def rate_difference_sequence(events_b: float, trials_b: float, events_a: float,
                             trials_a: float, alpha: float = 0.05) -> SequenceBound:
    """rate(B) - rate(A), from one interval per arm at alpha / 2 each (a union bound, so
    the difference covers with probability >= 1 - alpha at every look)."""
    b = binomial_sequence(events_b, trials_b, alpha / 2)
    a = binomial_sequence(events_a, trials_a, alpha / 2)
    estimate = b.estimate - a.estimate if trials_a and trials_b else math.nan
    return SequenceBound(min(a.n, b.n), estimate, b.low - a.high, b.high - a.low)
