"""Confidence sequences: valid over every look, and tighter as evidence grows."""

from __future__ import annotations

import numpy as np
import pytest

from layergate.exporters.figures.sequential import (
    mean_path,
    mean_sequence,
    radius_factor,
    ratio_path,
)

MIN_N = 30  # callers act only after a minimum count, as with fixed-sample CIs


def ever_excludes(low: np.ndarray, high: np.ndarray, truth: float) -> bool:
    return bool(np.any((low[MIN_N:] > truth) | (high[MIN_N:] < truth)))


@pytest.mark.parametrize("draw", [
    lambda rng, n: rng.normal(0.0, 1.0, n),
    lambda rng, n: rng.normal(0.0, 0.1, n) + np.log(rng.lognormal(0.0, 0.1, n)),  # log ratios
])
def test_mean_sequence_is_valid_over_every_look(draw) -> None:
    """Watched after every observation up to 600, the interval misses the true mean in at
    most about alpha of the streams (a fixed-sample 95 % CI watched this way misses in
    roughly a third of them, which the second half checks)."""
    rng = np.random.default_rng(7)
    streams = 1000
    misses = naive_misses = 0
    for _ in range(streams):
        x = draw(rng, 600)
        mean, low, high = mean_path(x, alpha=0.05, n_opt=100)
        misses += ever_excludes(low, high, 0.0)
        n = np.arange(1, x.size + 1)
        sd = np.sqrt(np.maximum(np.cumsum(x * x) / n - mean**2, 0) * n / np.maximum(n - 1, 1))
        half = 1.96 * sd / np.sqrt(n)
        naive_misses += ever_excludes(mean - half, mean + half, 0.0)
    assert misses / streams <= 0.06
    assert naive_misses / streams > 3 * max(misses / streams, 0.05)


def test_width_shrinks_and_detects_a_real_difference() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(0.3, 1.0, 2000)
    early, late = mean_sequence(x[:50]), mean_sequence(x)
    assert late.high - late.low < 0.5 * (early.high - early.low)
    assert late.excludes(0.0) and not late.excludes(0.3)


def test_ratio_path_covers_the_true_ratio() -> None:
    """sum(B) / sum(A) for paired latencies whose true ratio is 0.85."""
    rng = np.random.default_rng(3)
    streams, misses = 500, 0
    for _ in range(streams):
        a = rng.lognormal(0.0, 0.5, 400)
        b = 0.85 * a * rng.lognormal(-0.005, 0.1, 400)  # E[lognormal] = 1 with that shift
        r, low, high = ratio_path(b, a)
        misses += ever_excludes(low, high, 0.85)
    assert misses / streams <= 0.06


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="alpha"):
        radius_factor(10, alpha=1.5, n_opt=100)
    with pytest.raises(ValueError, match="non-empty"):
        mean_path(np.array([]))
    with pytest.raises(ValueError, match="same length"):
        ratio_path(np.ones(3), np.ones(4))
