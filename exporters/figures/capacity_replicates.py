"""The capacity ratio across replicate sweeps: the interval that covers.

One sweep's bootstrap (exporters/figures/capacity.py) resamples the requests of the steps it ran;
it cannot see that another arrival schedule would have put the knee elsewhere, nor that
SLO misses cluster in busy periods, nor the ladder's adaptivity (measured: 32-48 % coverage
of its 95 % interval on ideal slot servers, issue 33). So the interval comes from
replicates: R sweeps of the same arms, each with a fresh seed (its own arrival schedules
and steps), each giving one ratio r_i. On the log scale, where a ratio's noise is closer to
symmetric, the interval is

    mean(log r) +- t_nu * sqrt(s^2 / R + 2 tau^2)

s the SD of the log ratios across replicates and tau the between-process SD of one engine
process's log capacity (each arm's process, shared by every replicate that reuses it, moves
every replicate alike: the A'/A noise floor's reason); nu the Welch-Satterthwaite degrees
of freedom, (s^2/R + 2 tau^2)^2 / ((s^2/R)^2 / (R - 1)) (tau is taken as known), then
exponentiated. Adding the two half-widths in quadrature instead over-covered (A/A: 100 %
of 400 sweeps). Unit: the ratio (candidate capacity / baseline capacity), level
`confidence` two-sided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.special import ndtri, stdtrit


@dataclass(frozen=True)
class ReplicatedRatio:
    value: float  # exp(mean log ratio): the geometric mean of the replicates' ratios
    low: float
    high: float
    replicates: int
    sd_log: float  # SD of the log ratios across replicates
    half_width_log: float
    confidence: float
    process_spread: float

    def replicates_for(self, half_width_log: float) -> int | None:
        """How many replicates would bring the log interval's half-width to
        `half_width_log`, at this run's spread; None when the process term alone is wider
        (no number of replicates on the same processes narrows it)."""
        return replicates_needed(self.sd_log, self.process_spread, half_width_log,
                                 self.confidence)


def _process_term(tau: float, confidence: float) -> float:
    return float(ndtri((1 + confidence) / 2)) * math.sqrt(2) * tau


def _half_width(sd: float, n: int, tau: float, confidence: float) -> float:
    sampled, process = sd * sd / n, 2 * tau * tau
    total = sampled + process
    if total <= 0:
        return 0.0
    df = total ** 2 / (sampled ** 2 / (n - 1)) if sampled > 0 else math.inf
    q = (1 + confidence) / 2
    t = float(ndtri(q)) if math.isinf(df) else float(stdtrit(df, q))
    return t * math.sqrt(total)


def replicated_ratio(ratios: Sequence[float], process_spread: float = 0.02,
                     confidence: float = 0.95) -> ReplicatedRatio:
    """The interval of the capacity ratio from replicate sweeps' ratios (at least two,
    each finite and > 0: a replicate without a capacity has no ratio to pool)."""
    if len(ratios) < 2:
        raise ValueError(f"replicated_ratio: needs at least 2 replicates, got {len(ratios)}")
    bad = [r for r in ratios if not (math.isfinite(r) and r > 0)]
    if bad:
        raise ValueError(f"replicated_ratio: every ratio must be finite and > 0, got {bad[0]}")
    logs = [math.log(r) for r in ratios]
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = _half_width(sd, n, process_spread, confidence)
    return ReplicatedRatio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n,
                           sd, half, confidence, process_spread)


def replicates_needed(sd_log: float, process_spread: float, half_width_log: float,
                      confidence: float = 0.95) -> int | None:
    """The fewest replicates R whose interval's log half-width is at most
    `half_width_log`, for replicates spread by `sd_log`; None when the process term alone
    exceeds it."""
    proc = _process_term(process_spread, confidence)
    if proc >= half_width_log:
        return None
    for n in range(2, 10_000):
        if _half_width(sd_log, n, process_spread, confidence) <= half_width_log:
            return n
    return None
