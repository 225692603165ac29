"""Coverage of the speculative figures' intervals by simulation (docs/VALIDITY.md, "Every
interval"): `spec_accept_length` and `spec_acceptance_rate` from per-request draft counts
(the `layergate` extension's, or vLLM's per-request metrics), through the code a run uses
(`compute_figures` on the requests as `ArmResult`s: the figure's columns and sums, the
shared stratified bootstrap, `estimate`), at the run's defaults (1000 resamples, 95 %).

Each request verifies 1 + Poisson(`--steps` - 1) drafts of `--k` tokens. Requests differ:
each has its own acceptance propensity q ~ Beta(`--a`, `--b`) (prompts an n-gram drafter
finds much in, and prompts it finds nothing in), and within a draft the tokens are accepted
in order, each with probability q, up to the first rejection (what verification does).
The truth is the population's ratio of expected sums, 1 + E[accepted] / E[drafts],
computed from a million requests; a set's interval covers it or not.

    PYTHONPATH=. python benchmarks/spec_simulation.py [--sets 2000] [--sizes 8 24 100 400]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
from scipy.stats import beta

from layergate.exporters.catalogue import (
    BASELINE,
    CANDIDATE,
    SPEC_ACCEPT_LENGTH,
    SPEC_ACCEPTANCE_RATE,
)
from layergate.exporters.figures import OVERALL
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.records import ArmResult

ARM = CANDIDATE


def requests(rng: np.random.Generator, n: int, args: argparse.Namespace
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(drafts verified, draft tokens proposed, draft tokens accepted) of n requests."""
    steps = 1 + rng.poisson(args.steps - 1, size=n)
    q = rng.beta(args.a, args.b, size=n)
    total = int(steps.sum())
    q_step = np.repeat(q, steps)
    # accepted in a draft: the run of successes before the first failure, capped at k
    accepted = np.minimum(rng.geometric(1 - q_step, size=total) - 1, args.k)
    owner = np.repeat(np.arange(n), steps)
    return (steps.astype(float), steps * float(args.k),
            np.bincount(owner, weights=accepted, minlength=n))


def results(drafts: np.ndarray, proposed: np.ndarray, accepted: np.ndarray
            ) -> list[ArmResult]:
    """The requests as a run stores them: a baseline without drafting and the candidate
    with its per-request draft counts in the `layergate` extension (as the reference engine
    and vLLM's per-request metrics give them), each verify step one token plus those
    accepted."""
    rows = []
    for i, (d, p, a) in enumerate(zip(drafts, proposed, accepted, strict=True)):
        tokens = int(d + a)
        rows.append(ArmResult(f"q{i:04d}", BASELINE, "mix", True, ttft_s=0.1,
                              e2e_s=0.1 + 0.02 * tokens, output_tokens=tokens))
        rows.append(ArmResult(f"q{i:04d}", ARM, "mix", True, ttft_s=0.1,
                              e2e_s=0.1 + 0.01 * tokens, output_tokens=tokens,
                              extension={"draft_steps": int(d), "draft_tokens_proposed":
                                         int(p), "draft_tokens_accepted": int(a)}))
    return rows


def one_set(rng: np.random.Generator, n: int, args: argparse.Namespace,
            config: MetricsConfig, seed: int) -> dict[str, tuple[float, float]]:
    """A set's intervals, computed as a run computes them: `compute_figures` on its
    results (the columns, the shared stratified bootstrap, `estimate`)."""
    figures = compute_figures(results(*requests(rng, n, args)),
                              config=replace(config, seed=seed))
    return {f.name: (f.ci_low, f.ci_high) for f in figures
            if f.arm == ARM and f.scenario == OVERALL
            and f.name in (SPEC_ACCEPT_LENGTH, SPEC_ACCEPTANCE_RATE)}


def coverage(n: int, sets: int, argv: list[str] | None = None, seed: int = 0
             ) -> dict[str, int]:
    """`sets` sets of `n` requests: per figure, how many intervals covered the truth, and
    how many had their lower end above it. What `make validity` and the suite rerun."""
    args = parse_args(argv or [])
    truth = truths(args)
    rng = np.random.default_rng([seed, n])
    config = MetricsConfig()
    out: dict[str, int] = {}
    for i in range(sets):
        got = one_set(rng, n, args, config, seed + i)
        for name, value in truth.items():
            low, high = got[name]
            ok = low is not None and high is not None
            out[f"{name} covers"] = out.get(f"{name} covers", 0) + int(ok and low <= value <= high)
            out[f"{name} above"] = out.get(f"{name} above", 0) + int(ok and low > value)
    return out


def share(k: int, n: int) -> str:
    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return f"{k / n:.3f} [{low:.3f}, {high:.3f}]"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=2000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 24, 100, 400])
    parser.add_argument("--steps", type=float, default=6.0, help="mean drafts per request")
    parser.add_argument("--k", type=int, default=3, help="tokens drafted per draft")
    parser.add_argument("--a", type=float, default=1.0)
    parser.add_argument("--b", type=float, default=1.5)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def truths(args: argparse.Namespace) -> dict[str, float]:
    """The figures' population values: ratios of sums over a million requests."""
    drafts, proposed, accepted = requests(np.random.default_rng(args.seed), 1_000_000, args)
    return {SPEC_ACCEPT_LENGTH: 1 + accepted.sum() / drafts.sum(),
            SPEC_ACCEPTANCE_RATE: accepted.sum() / proposed.sum()}


def main() -> None:
    args = parse_args()
    config = MetricsConfig()
    truth = truths(args)
    print(f"q ~ Beta({args.a}, {args.b}), {args.steps} drafts of {args.k} a request: truth "
          + ", ".join(f"{k} {v:.4f}" for k, v in truth.items()))
    for n in args.sizes:
        rng = np.random.default_rng([args.seed, n])
        started = time.perf_counter()
        sets = [one_set(rng, n, args, config, args.seed + i) for i in range(args.sets)]
        print(f"n={n}: {args.sets} sets, {time.perf_counter() - started:.0f} s")
        for name, value in truth.items():
            low = np.array([s[name][0] for s in sets], dtype=float)
            high = np.array([s[name][1] for s in sets], dtype=float)
            covered = int(((low <= value) & (value <= high)).sum())
            above = int((low > value).sum())
            print(f"  {name:<21} coverage {share(covered, args.sets)}   lower end above the "
                  f"truth {share(above, args.sets)}   mean width {np.nanmean(high - low):.3f}")


if __name__ == "__main__":
    main()
