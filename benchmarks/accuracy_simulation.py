"""Validity of the paired accuracy figures by simulation (docs/VALIDITY.md, "Accuracy
against references").

Each set is n items with a difficulty p_i ~ Beta(2, 1) (so correctness is correlated
across arms: an easy item is right on both). Each arm's correctness on item i is a draw
shared by the arms, Bernoulli(p_i), except that with probability `redraw` the arm draws
its own (1: independent given the difficulty, the noisiest case; 0.1: arms that mostly
give the same answer, as two replicas of one model do). The baseline and a second
baseline are such arms: a true delta of 0 (A/A). The planted
candidate answers as the baseline's model would (its own draws) but is wrong on a known
extra `lost` share of the items (the first ones), so its true delta is -lost x mean p_i on
them. Every set's figures come from the project's own path (accuracy columns, the shared
stratified bootstrap, `estimate`, McNemar exact), at the run's defaults (1000 resamples,
95 %).

Reported: the share of A/A sets whose accuracy_delta interval excludes 0 (nominal 5 %) and
whose McNemar p < 0.05, each with its 95 % Clopper-Pearson interval; the power against the
planted candidate: the interval wholly below 0, wholly below -0.02 (the `lossy` policy
fails it), and McNemar p < 0.05.

    PYTHONPATH=. python benchmarks/accuracy_simulation.py [--sets 2000]
        [--sizes 48 200 500] [--redraw 0.1 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import beta

from layergate.exporters.catalogue import ACCURACY_DELTA
from layergate.exporters.figures.accuracy import mcnemar_exact, paired_stats
from layergate.exporters.figures.bootstrap import resample_sums
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import estimate


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def one_set(rng: np.random.Generator, n: int, lost: float, redraw: float,
            config: MetricsConfig, seed: int) -> tuple[float, float, float]:
    """(ci_low, ci_high, McNemar p) of accuracy_delta, candidate against baseline."""
    p = rng.beta(2, 1, size=n)
    shared = rng.random(n) < p

    def arm() -> np.ndarray:
        own = rng.random(n) < redraw
        return np.where(own, rng.random(n) < p, shared)

    a, x = arm(), arm()
    x[: round(lost * n)] = False  # the known extra items the candidate gets wrong
    cols = {"acc.candidate.pair": np.ones(n), "acc.candidate.rw": (a & ~x).astype(float),
            "acc.candidate.wr": (~a & x).astype(float)}
    table = resample_sums(cols, np.zeros(n, dtype=np.int64), 1, config.n_resamples, seed)
    stat = paired_stats("candidate")[ACCURACY_DELTA]
    [fig] = [f for f in estimate(table, stat, (), config, ACCURACY_DELTA, "candidate")]
    return (fig.ci_low if fig.ci_low is not None else np.nan,
            fig.ci_high if fig.ci_high is not None else np.nan,
            mcnemar_exact(int((a & ~x).sum()), int((~a & x).sum())))


def share(k: int, n: int) -> str:
    low, high = clopper_pearson(k, n)
    return f"{k / n:.3f} [{low:.3f}, {high:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=2000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[48, 200, 500])
    parser.add_argument("--lost", type=float, default=0.10)
    parser.add_argument("--redraw", type=float, nargs="+", default=[0.1, 1.0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = MetricsConfig()
    cases = [(r, n, label, lost) for r in args.redraw for n in args.sizes
             for label, lost in (("A/A", 0.0), (f"planted {args.lost:.0%}", args.lost))]
    for redraw, n, label, lost in cases:
        rng = np.random.default_rng([args.seed, n, int(lost * 1000), int(redraw * 1000)])
        started = time.perf_counter()
        rows = np.array([one_set(rng, n, lost, redraw, config, args.seed + k)
                         for k in range(args.sets)])
        low, high, pval = rows.T
        excl = int(((low > 0) | (high < 0)).sum())
        below = int((high < 0).sum())
        fails = int((high < -0.02).sum())
        mc = int((pval < 0.05).sum())
        true = -lost * 2 / 3  # the planted items' mean p_i under Beta(2, 1)
        print(f"redraw={redraw} n={n} {label}, true delta {true:+.3f}: {args.sets} sets, "
              f"{time.perf_counter() - started:.0f} s")
        print(f"  interval excludes 0: {share(excl, args.sets)}   "
              f"wholly below 0: {share(below, args.sets)}")
        print(f"  wholly below -0.02 (lossy fails): {share(fails, args.sets)}   "
              f"McNemar p < 0.05: {share(mc, args.sets)}")

if __name__ == "__main__":
    main()
