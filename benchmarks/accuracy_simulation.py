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
from dataclasses import replace

import numpy as np
from scipy.stats import beta

from layergate.exporters.catalogue import (
    ACCURACY_DELTA,
    ACCURACY_MCNEMAR_P,
    BASELINE,
    CANDIDATE,
)
from layergate.exporters.figures import OVERALL
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.records import ArmResult
from layergate.exporters.references import Reference


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


REFERENCE = Reference("exact", answers=("right",))


def results(a: np.ndarray, x: np.ndarray) -> tuple[list[ArmResult], dict[str, Reference]]:
    """The set as a run stores it: each arm's answer per item ("right" or "wrong"), with
    every item's reference."""
    rows = []
    for i, (right_a, right_x) in enumerate(zip(a, x, strict=True)):
        for arm, right in ((BASELINE, right_a), (CANDIDATE, right_x)):
            rows.append(ArmResult(f"q{i:04d}", arm, "mix", True, ttft_s=0.1, e2e_s=0.5,
                                  output_tokens=1,
                                  output_text="right" if right else "wrong"))
    return rows, {f"q{i:04d}": REFERENCE for i in range(len(a))}


def one_set(rng: np.random.Generator, n: int, lost: float, redraw: float,
            config: MetricsConfig, seed: int) -> tuple[float, float, float]:
    """(ci_low, ci_high, McNemar p) of accuracy_delta, candidate against baseline, as a run
    computes them: `compute_figures` on the answers and their references (the outputs
    scored, the accuracy columns, the shared bootstrap, `estimate`, McNemar exact)."""
    p = rng.beta(2, 1, size=n)
    shared = rng.random(n) < p

    def arm() -> np.ndarray:
        own = rng.random(n) < redraw
        return np.where(own, rng.random(n) < p, shared)

    a, x = arm(), arm()
    x[: round(lost * n)] = False  # the known extra items the candidate gets wrong
    rows, references = results(a, x)
    figures = {f.name: f for f in compute_figures(rows, config=replace(config, seed=seed),
                                                   references=references)
               if f.arm == CANDIDATE and f.scenario == OVERALL}
    fig, mc = figures[ACCURACY_DELTA], figures[ACCURACY_MCNEMAR_P]
    return (fig.ci_low if fig.ci_low is not None else np.nan,
            fig.ci_high if fig.ci_high is not None else np.nan,
            mc.value if mc.value is not None else np.nan)


def aa_exclusions(n: int, redraw: float, sets: int, seed: int = 0, lost: float = 0.0
                  ) -> dict[str, int]:
    """Sets of `n` items (A/A, or a candidate that `lost` a share of them): how many
    intervals excluded 0, lay wholly below -0.02, and McNemar p < 0.05. What `make
    validity` and the suite rerun (the seeds main uses)."""
    rng = np.random.default_rng([seed, n, int(lost * 1000), int(redraw * 1000)])
    config = MetricsConfig()
    rows = np.array([one_set(rng, n, lost, redraw, config, seed + k) for k in range(sets)])
    low, high, pval = rows.T
    return {"excludes 0": int(((low > 0) | (high < 0)).sum()),
            "below -0.02": int((high < -0.02).sum()), "mcnemar": int((pval < 0.05).sum())}


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
