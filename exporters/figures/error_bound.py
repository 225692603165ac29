"""The exact (Clopper-Pearson) one-sided upper confidence bound of an error rate.

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
