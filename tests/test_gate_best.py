"""Candidates compared with each other: each its own process draw, paired differences, the
set not worse than the best and the recommendation's selection-adjusted interval, checked
by repetition on simulated resamples (a saving's resamples: shared request noise plus each
candidate's own)."""

from __future__ import annotations

import numpy as np

from layergate.exporters.catalogue import ARMS, CANDIDATE
from layergate.exporters.figures.process_spread import process_draws
from layergate.harness.gate.fixed.best import (
    not_worse_than_best,
    paired_differences,
    selected_bounds,
)

NAMES = ("c1", "c2", "c3")


def test_each_candidate_draws_its_own_process_and_one_candidate_as_before():
    old = dict(zip(ARMS, np.random.default_rng([0, 0x5EED]).standard_normal((3, 500)),
                   strict=True))
    alone = process_draws(500, 0)
    assert all(np.array_equal(alone[a], old[a]) for a in ARMS)
    mine = {n: process_draws(500, 0, n) for n in NAMES}
    assert not np.allclose(mine["c1"][CANDIDATE], mine["c2"][CANDIDATE])
    assert not np.allclose(mine["c1"][CANDIDATE], alone[CANDIDATE])
    assert np.array_equal(mine["c1"]["baseline"], alone["baseline"])  # the shared A
    assert np.array_equal(process_draws(500, 0, "c1")[CANDIDATE], mine["c1"][CANDIDATE])


def _family(rng: np.random.Generator, means: tuple[float, ...], r: int = 400):
    """Points and paired resamples of m savings with SE 1: half the variance shared (the
    same requests), half each candidate's own (its process)."""
    shared, own = rng.normal(0, np.sqrt(0.5)), rng.normal(0, np.sqrt(0.5), len(means))
    points = {n: m + shared + e for n, m, e in zip(NAMES, means, own, strict=True)}
    b_shared = rng.normal(0, np.sqrt(0.5), r)
    boots = {n: points[n] + b_shared + rng.normal(0, np.sqrt(0.5), r) for n in NAMES}
    return points, boots


def test_selected_interval_holds_for_the_winner_where_its_own_does_not():
    rng = np.random.default_rng(7)
    naive = adjusted = 0
    reps = 1000
    for _ in range(reps):
        points, boots = _family(rng, (0.0, 0.0, 0.0))
        winner = max(points, key=points.get)
        naive += np.quantile(boots[winner], 0.025) > 0
        adjusted += selected_bounds(points, boots, 0.05)[winner][0] > 0
    assert adjusted / reps <= 0.04 < 0.05 <= naive / reps


def test_not_worse_than_best_keeps_the_best_and_drops_the_clearly_worse():
    rng = np.random.default_rng(11)
    dropped_a_best = dropped_worse = 0
    reps = 300
    for _ in range(reps):
        points, boots = _family(rng, (0.0, 0.0, -6.0))
        kept = not_worse_than_best(points, boots, 0.05)
        dropped_a_best += "c1" not in kept
        dropped_worse += "c3" not in kept
    assert dropped_a_best / reps <= 0.07
    assert dropped_worse / reps >= 0.9


def test_paired_differences_are_paired_and_family_wise():
    rng = np.random.default_rng(5)
    points, boots = _family(rng, (0.0, 0.0, 0.0))
    diffs = paired_differences(points, boots, 0.05)
    assert [(d.first, d.second) for d in diffs] == [("c1", "c2"), ("c1", "c3"), ("c2", "c3")]
    assert all(abs(d.confidence - (1 - 0.05 / 3)) < 1e-12 for d in diffs)
    # the shared request noise cancels: narrower than the two intervals side by side
    d = diffs[0]
    apart = boots["c1"] - rng.permutation(boots["c2"])  # the pairing broken
    unpaired = np.quantile(apart, 1 - 0.05 / 6) - np.quantile(apart, 0.05 / 6)
    assert d.high - d.low < 0.85 * unpaired


def test_the_family_simulation_benchmark_runs():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "family_simulation.py"),
                           "--families", "3", "--resamples", "200"], capture_output=True,
                          text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    assert "family-wise pass" in done.stdout
