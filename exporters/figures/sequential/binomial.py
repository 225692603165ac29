"""The beta-binomial mixture: an exact confidence sequence for a Bernoulli rate (errors per
request), valid at every n and for any p, including p near 0 where normal approximations
fail (Robbins 1970; Howard, Ramdas, McAuliffe and Sekhon, Ann. Statist. 2021, sec. 3):
with S events in n trials, {p : B(a + S, b + n - S) / B(a, b) / (p^S (1 - p)^(n - S)) <
1/alpha}. Counts may be fractional (Prometheus's extrapolated increases).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from layergate.exporters.figures.sequential.bound import SequenceBound
from layergate.exporters.figures.sequential.bound import check_alpha as _check_alpha

JEFFREYS = (0.5, 0.5)  # the beta mixture's prior: no preference between rare and common


def _outside(events: float, trials: float, alpha: float, prior: tuple[float, float]
             ) -> Callable[[float], bool]:
    """Whether a rate p lies outside the interval after `events` in `trials`: the mixture's
    likelihood ratio against p at least 1 / alpha."""
    a, b = prior
    s, f = events, trials - events
    # log of the mixture's marginal likelihood; p is inside where
    # log_marginal - log p^s (1 - p)^f < log(1 / alpha)
    log_marginal = (math.lgamma(a + s) + math.lgamma(b + f) - math.lgamma(a + b + trials)
                    - math.lgamma(a) - math.lgamma(b) + math.lgamma(a + b))
    bound = math.log(1 / alpha) - log_marginal

    def outside(p: float) -> bool:
        return -((s * math.log(p) if s else 0.0) + (f * math.log1p(-p) if f else 0.0)) >= bound

    return outside


def binomial_sequence(events: float, trials: float, alpha: float = 0.05,
                      prior: tuple[float, float] = JEFFREYS) -> SequenceBound:
    """The interval for a Bernoulli rate after `events` in `trials` (counts may be
    fractional, as Prometheus's extrapolated increases are)."""
    _check(events, trials, alpha)
    if trials == 0:
        return SequenceBound(0, math.nan, 0.0, 1.0)
    outside = _outside(events, trials, alpha, prior)

    def edge(out: float, into: float) -> float:
        # convex in p with its minimum at the estimate: one crossing on each side
        for _ in range(48):
            mid = (out + into) / 2
            out, into = (mid, into) if outside(mid) else (out, mid)
        return into

    p_hat, tiny = events / trials, 1e-12
    low = 0.0 if not outside(tiny) else edge(tiny, max(p_hat, 2 * tiny))
    high = 1.0 if not outside(1 - tiny) else edge(1 - tiny, min(p_hat, 1 - 2 * tiny))
    return SequenceBound(int(round(trials)), p_hat, min(low, p_hat), max(high, p_hat))


def below(events: float, trials: float, limit: float, alpha: float = 0.05,
          prior: tuple[float, float] = JEFFREYS) -> bool:
    """Whether the interval after `events` in `trials` lies wholly at or below `limit`
    (> 0): the estimate within it and `limit` outside. One evaluation, no bisection: the
    sequential gate asks it after every request."""
    _check(events, trials, alpha)
    if not 0 < limit < 1:
        raise ValueError(f"limit must be in (0, 1), got {limit}")
    return trials > 0 and events / trials <= limit and \
        _outside(events, trials, alpha, prior)(limit)


def _check(events: float, trials: float, alpha: float) -> None:
    _check_alpha(alpha)
    if trials < 0 or not 0 <= events <= trials:
        raise ValueError(f"need 0 <= events <= trials, got {events} of {trials}")


def rate_difference_sequence(events_b: float, trials_b: float, events_a: float,
                             trials_a: float, alpha: float = 0.05) -> SequenceBound:
    """rate(B) - rate(A), from one interval per arm at alpha / 2 each (a union bound, so
    the difference covers with probability >= 1 - alpha at every look)."""
    b = binomial_sequence(events_b, trials_b, alpha / 2)
    a = binomial_sequence(events_a, trials_a, alpha / 2)
    estimate = b.estimate - a.estimate if trials_a and trials_b else math.nan
    return SequenceBound(min(a.n, b.n), estimate, b.low - a.high, b.high - a.low)
