"""The capacity ratio across replicate sweeps: the interval that covers.

One sweep's bootstrap (exporters/figures/capacity.py) resamples the requests of the steps it ran;
it cannot see that another arrival schedule would have put the knee elsewhere, nor that
SLO misses cluster in busy periods, nor the ladder's adaptivity (measured: 32-48 % coverage
of its 95 % interval on ideal slot servers, issue 33). So the interval comes from
replicates: R sweeps of the same arms, each with a fresh seed (its own arrival schedules
and steps), each giving one ratio r_i, taken on the log scale, where a ratio's noise is
closer to symmetric. Two intervals, by whether the replicates share the arms' processes:

- **Restarted arms** (`capacity --restart`, `restarted_ratio`): every replicate on
  processes of its own, so the r_i are independent draws that carry the between-process
  spread themselves. The interval is the Wilcoxon signed-rank one on log r
  (exporters/figures/signed_rank.py): exact for any symmetric distribution of the replicates,
  at least `confidence` (0.961 at R = 8), from R >= 6. Not the t-interval: identical arms
  step together and their ratios cancel unless their ladders part (a quarter of ladders,
  ten times the spread), a heavy-tailed mixture (kurtosis 10) on which the t-interval
  over-covered (98.9 % of 2000 simulated A/A sweeps; the signed-rank one 96.5 %).
- **The same processes** (`replicated_ratio`): each arm's process, shared by every
  replicate, moves them all alike; no number of replicates shows it. The interval is

      mean(log r) +- t_nu * sqrt(s^2 / R + 2 tau^2)

  s the SD of the log ratios across replicates and tau the prior between-process SD of one
  engine process's log capacity; nu the Welch-Satterthwaite degrees of freedom,
  (s^2/R + 2 tau^2)^2 / ((s^2/R)^2 / (R - 1)) (tau is taken as known), then exponentiated.
  It is only as good as tau (processes twice as spread: 79-83 % coverage), and over-covers
  identical arms for the mixture above (98.4 %). Adding the two half-widths in quadrature
  instead over-covered further (A/A: 100 % of 400 sweeps).

Unit: the ratio (candidate capacity / baseline capacity), level `confidence` two-sided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.special import ndtri, stdtrit

from layergate.exporters.figures.signed_rank import least_draws, signed_rank_interval

T_INTERVAL, SIGNED_RANK = "t", "signed-rank"


@dataclass(frozen=True)
class ReplicatedRatio:
    # exp(mean log ratio), the geometric mean of the replicates' ratios; signed-rank:
    # exp(the Hodges-Lehmann estimate)
    value: float
    low: float
    high: float
    replicates: int
    sd_log: float  # SD of the log ratios across replicates
    half_width_log: float
    confidence: float  # the level reached (signed-rank: at least the one asked)
    process_spread: float  # the prior term's tau (0: restarted arms)
    method: str = T_INTERVAL

    def replicates_for(self, half_width_log: float) -> int | None:
        """How many replicates would bring the log interval's half-width to
        `half_width_log`, at this run's spread; None when the process term alone is wider
        (no number of replicates on the same processes narrows it). For the signed-rank
        interval the t-interval's number, at least the draws it needs: a guide, not exact."""
        need = replicates_needed(self.sd_log, self.process_spread, half_width_log,
                                 self.confidence)
        if need is None or self.method == T_INTERVAL:
            return need
        return max(need, least_draws(self.confidence))


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
    logs = _logs(ratios, 2, "replicated_ratio")
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = _half_width(sd, n, process_spread, confidence)
    return ReplicatedRatio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n,
                           sd, half, confidence, process_spread)


def _logs(ratios: Sequence[float], least: int, what: str) -> list[float]:
    if len(ratios) < least:
        raise ValueError(f"{what}: needs at least {least} replicates, got {len(ratios)}")
    bad = [r for r in ratios if not (math.isfinite(r) and r > 0)]
    if bad:
        raise ValueError(f"{what}: every ratio must be finite and > 0, got {bad[0]}")
    return [math.log(r) for r in ratios]


def restarted_ratio(ratios: Sequence[float], confidence: float = 0.95) -> ReplicatedRatio:
    """The interval of the capacity ratio from replicates on restarted arms (at least
    `least_draws(confidence)`: 6 at 0.95): the signed-rank interval on the log ratios."""
    logs = _logs(ratios, least_draws(confidence), "restarted_ratio")
    got = signed_rank_interval(logs, confidence)
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    return ReplicatedRatio(math.exp(got.centre), math.exp(got.low), math.exp(got.high), n,
                           sd, (got.high - got.low) / 2, got.level, 0.0, SIGNED_RANK)


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
