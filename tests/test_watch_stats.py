"""The exact confidence sequences behind `layergate watch`: valid at every look from the
first windows on, for near-Gaussian window observations and for rare events."""

from __future__ import annotations

import math

import numpy as np
import pytest

from layergate.exporters.figures.sequential import (
    binomial_sequence,
    rate_difference_sequence,
    t_factor,
    t_mean_path,
    t_mean_sequence,
    t_mixture_tau2,
    windows_needed,
)


def test_t_mixture_covers_at_every_look_from_the_second_window() -> None:
    """2000 streams of 40 windows of N(0.3, 0.2) (a log latency ratio's scale), looked at
    after every window: the interval misses 0.3 in at most alpha of the streams, while a
    fixed-sample t interval looked at the same way misses far more often."""
    rng = np.random.default_rng(11)
    streams, misses, naive = 2000, 0, 0
    for _ in range(streams):
        x = rng.normal(0.3, 0.2, 40)
        _, low, high = t_mean_path(x, alpha=0.05, n_opt=5)
        misses += bool(np.any((low > 0.3) | (high < 0.3)))
        n = np.arange(2, 41)
        mean = np.cumsum(x)[1:] / n
        sd = np.array([x[:k].std(ddof=1) for k in n])
        half = 2.0 * sd / np.sqrt(n)  # ~ t quantile for these n
        naive += bool(np.any(np.abs(mean - 0.3) > half))
    assert misses / streams <= 0.05
    assert naive / streams > 2 * 0.05


def test_t_mixture_is_unbounded_until_it_can_say_something() -> None:
    tau2 = t_mixture_tau2(0.05, 5)
    assert t_factor(1, 0.05, tau2) == math.inf
    assert t_factor(3, 0.05, tau2) == math.inf
    assert t_factor(4, 0.05, tau2) < math.inf
    one = t_mean_sequence([0.1])
    assert one.low == -math.inf and one.high == math.inf
    # identical values: no spread, yet no decision before the mixture allows one
    assert t_mean_sequence([0.0, 0.0]).high == math.inf


def test_t_mixture_narrows_and_the_width_goes_where_n_opt_says() -> None:
    early, late = t_mixture_tau2(0.05, 5), t_mixture_tau2(0.05, 30)
    assert t_factor(5, 0.05, early) < t_factor(5, 0.05, late)
    assert t_factor(30, 0.05, late) < t_factor(30, 0.05, early)
    factors = [t_factor(n, 0.05, early) for n in range(4, 60)]
    assert all(a > b for a, b in zip(factors, factors[1:], strict=False))


def test_windows_needed_is_the_first_n_whose_half_width_clears_the_gap() -> None:
    n = windows_needed(gap=0.3, sd=0.1, alpha=0.01, n_opt=5)
    tau2 = t_mixture_tau2(0.01, 5)
    assert 0.1 * t_factor(n, 0.01, tau2) < 0.3 <= 0.1 * t_factor(n - 1, 0.01, tau2)
    assert windows_needed(gap=0.1, sd=0.1, alpha=0.01, n_opt=5) > n  # closer: longer
    assert windows_needed(gap=1e-6, sd=1.0, alpha=0.01, n_opt=5, limit=50) is None


@pytest.mark.parametrize("p", [0.002, 0.05, 0.3])
def test_binomial_sequence_covers_rare_and_common_rates(p: float) -> None:
    """Bernoulli(p) streams looked at every 50 requests up to 2000: misses <= alpha, also
    for a rate of 0.2 %, where a normal approximation fails."""
    rng = np.random.default_rng(int(p * 1000))
    streams, misses = 300, 0
    for _ in range(streams):
        events = np.cumsum(rng.random(2000) < p)
        for n in range(50, 2001, 50):
            b = binomial_sequence(int(events[n - 1]), n, alpha=0.05)
            if not b.low <= p <= b.high:
                misses += 1
                break
    assert misses / streams <= 0.05


def test_binomial_sequence_edges() -> None:
    none = binomial_sequence(0, 1000, 0.05)
    assert none.low == 0.0 and 0 < none.high < 0.01
    every = binomial_sequence(50, 50, 0.05)
    assert every.high == 1.0 and every.low > 0.8
    empty = binomial_sequence(0, 0)
    assert (empty.low, empty.high) == (0.0, 1.0)
    with pytest.raises(ValueError, match="events <= trials"):
        binomial_sequence(5, 3)


def test_rate_difference_decides_a_real_regression_and_not_noise() -> None:
    worse = rate_difference_sequence(60, 1000, 2, 1000, alpha=0.05)
    assert worse.low > 0.01
    same = rate_difference_sequence(3, 1000, 2, 1000, alpha=0.05)
    assert same.low < 0 < same.high
