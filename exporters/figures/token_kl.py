"""Token-level KL divergence between two arms' next-token distributions.

Only positions with the same context are comparable: those up to and including the first
divergence. At each, KL(A || X) is taken over A's top-k tokens, both distributions
renormalised there; a token missing from X's top-k gets X's smallest listed probability
(the most it can have had)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def position_kl(top_a: dict[str, float], top_x: dict[str, float]) -> float | None:
    if not top_a or not top_x:
        return None
    floor = min(top_x.values())
    pa = {t: math.exp(lp) for t, lp in top_a.items()}
    px = {t: math.exp(top_x.get(t, floor)) for t in top_a}
    za, zx = sum(pa.values()), sum(px.values())
    return sum((p / za) * math.log((p / za) / (px[t] / zx)) for t, p in pa.items() if p > 0)


def request_kl(top_a: Sequence[dict[str, float]] | None, top_x: Sequence[dict[str, float]] | None,
               common_prefix: int) -> tuple[float, int]:
    """(sum of KL over comparable positions, number of positions)."""
    if not top_a or not top_x:
        return 0.0, 0
    total, count = 0.0, 0
    for i in range(min(common_prefix + 1, len(top_a), len(top_x))):
        kl = position_kl(top_a[i], top_x[i])
        if kl is not None:
            total += kl
            count += 1
    return total, count
