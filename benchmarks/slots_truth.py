"""The slot servers' true capacity ratio with its Monte Carlo error (docs/VALIDITY.md,
"Capacity at the SLO": the truth the real sweeps of `capacity_slots_real.py` are held to).

The truth is the M/D/c steady state of the suite's echo servers (6 slots against 4, a
request 0.4 s, the TTFT limit less one token, attainment 0.9), each arm's capacity found
by bisection on one simulated stream of `--requests` Poisson arrivals
(`tests/support/slots.true_capacity`). One stream is one draw: the ratio from `--seeds`
streams of their own gives its Monte Carlo error (the SD across seeds: the error of the
published single-stream truth) and a truth to that error over √seeds.

A real sweep's interval is re-judged against it: an end within two standard errors of the
truth cannot be called a miss.

    PYTHONPATH=. .venv/bin/python benchmarks/slots_truth.py [--seeds 40] [--requests 20000]
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.capacity_slots_real import ATTAINMENT, LIMIT_S, TOKEN_S, TOKENS  # noqa: E402
from tests.support.slots import true_capacity  # noqa: E402

PUBLISHED = 1.6426  # the single-stream truth (seed 1, 20 000 requests)
# the real sweeps' interval ends nearest the truth (docs/VALIDITY.md): (what, end, side)
CLOSE_CALLS = (("3 replicates, sweep 19: lower end", 1.646, "low"),
               ("6 restarted replicates, sweep 16: lower end", 1.656, "low"),
               ("6 restarted replicates, sweep 1: upper end", 1.573, "high"))


@dataclass(frozen=True)
class Truth:
    mean: float  # over the seeds' streams
    sd: float  # across them: one stream's Monte Carlo error
    seeds: int

    @property
    def se(self) -> float:
        return self.sd / math.sqrt(self.seeds)


def ratio(seed: int, requests: int) -> float:
    service, wait = TOKEN_S * TOKENS, LIMIT_S - TOKEN_S
    return (true_capacity(6, service, wait, ATTAINMENT, requests, seed)
            / true_capacity(4, service, wait, ATTAINMENT, requests, seed))


def truth(seeds: int = 40, requests: int = 20_000) -> Truth:
    got = np.array([ratio(seed, requests) for seed in range(1, seeds + 1)])
    return Truth(float(got.mean()), float(got.std(ddof=1)), seeds)


def judged(t: Truth, end: float, side: str) -> str:
    """Whether an interval end is a miss of the truth, given the truth's own error."""
    gap = end - t.mean if side == "low" else t.mean - end
    if abs(gap) <= 2 * t.se:
        return "within the truth's error: not a miss that can be told"
    return "a miss" if gap > 0 else "covers"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=40)
    parser.add_argument("--requests", type=int, default=20_000)
    args = parser.parse_args()
    t = truth(args.seeds, args.requests)
    print(f"true ratio over {t.seeds} streams of {args.requests} requests: {t.mean:.4f} "
          f"(SE {t.se:.4f}); one stream's Monte Carlo error (SD) {t.sd:.4f}; the published "
          f"single-stream truth {PUBLISHED} is {(PUBLISHED - t.mean) / t.sd:+.1f} SD off")
    for what, end, side in CLOSE_CALLS:
        print(f"  {what} {end}: {judged(t, end, side)}")


if __name__ == "__main__":
    main()
