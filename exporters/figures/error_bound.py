"""The exact (Clopper-Pearson) one-sided upper confidence bound of an error rate, and how
many requests a limit needs before the bound can show it.

Owned here so the fixed gate's error-rate rule and its docs name one bound: the largest
rate p at which `failed` or fewer errors in `total` requests still has probability at least
1 - confidence, i.e. the `confidence` quantile of Beta(failed + 1, total - failed).
"""

from __future__ import annotations

from scipy.special import betaincinv


def error_upper_bound(failed: int, total: int, confidence: float = 0.95) -> float:
    """The one-sided exact upper bound at `confidence` of the rate behind `failed` of
    `total`; 1.0 when every request failed."""
    if total <= 0:
        raise ValueError(f"error_upper_bound: total must be > 0, got {total}")
    if not 0 <= failed <= total:
        raise ValueError(f"error_upper_bound: failed must be in [0, {total}], got {failed}")
    if failed == total:
        return 1.0
    return float(betaincinv(failed + 1, total - failed, confidence))


def requests_to_show(failed: int, limit: float, confidence: float = 0.95) -> int:
    """The fewest requests in which `failed` errors put the upper bound at `confidence`
    within `limit` (> 0): 299 for no error against 1 % at 0.95. The bound falls as the
    requests grow, so a doubling then a bisection finds it."""
    if not 0 < limit < 1:
        raise ValueError(f"requests_to_show: limit must be in (0, 1), got {limit}")
    low, high = failed, max(2 * failed, 1)  # the bound is over the limit at `low`
    while error_upper_bound(failed, high, confidence) > limit:
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if error_upper_bound(failed, mid, confidence) <= limit \
            else (mid, high)
    return high
