"""Cache-hit delta: CHD = |h_X - h_A| / h_A, h = prefix-cache hit rate of an arm.

Overall, h comes from each arm's `/metrics` scraped before and after the run (counter
deltas), as DESIGN.md defines it; no CI (one number per arm). Per scenario the counters
cannot tell scenarios apart, so h comes from the per-request `layergate` extension
(`prefix_cache_hit_tokens` / `prefix_cache_query_tokens`), bootstrapped like the rest.
A baseline hit rate of 0, or absent counters, makes the figure not computable, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from exporters.aligned import BASELINE, BASELINE2, CANDIDATE, Aligned, compared_arms
from exporters.bootstrap import SumTable
from exporters.config import MetricsConfig
from exporters.estimate import SumStat, estimate, status_for
from exporters.figures import OVERALL, Figure
from exporters.prom_text import cache_counters
from exporters.records import MetricsScrape

NAME = "cache_hit_delta"


def hit_rate(scrapes: Sequence[MetricsScrape], arm: str) -> tuple[float | None, str]:
    """(Δhits / Δqueries over the run, "") or (None, why not)."""
    by_when = {s.when: s for s in scrapes if s.arm == arm}
    missing = [w for w in ("before", "after") if w not in by_when]
    if missing:
        return None, f"no {' / '.join(missing)} scrape of arm {arm!r}"
    before, after = (cache_counters(by_when[w].text) for w in ("before", "after"))
    if before is None or after is None:
        return None, f"arm {arm!r} exposes no prefix-cache counters"
    hits, queries = after.hits - before.hits, after.queries - before.queries
    if hits < 0 or queries < 0:
        return None, f"prefix-cache counters of arm {arm!r} went down (restarted?)"
    if queries == 0:
        return None, f"arm {arm!r} had no prefix-cache queries during the run"
    return hits / queries, ""


def delta(h_a: float | None, h_x: float | None) -> tuple[float | None, str]:
    if h_a is None or h_x is None:
        return None, "hit rate unknown"
    if h_a == 0:
        return None, "baseline prefix-cache hit rate is 0: the relative delta is undefined"
    return abs(h_x - h_a) / h_a, ""


def columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    a = al.arms.get(BASELINE)
    for arm in compared_arms(al):
        x = al.arms[arm]
        valid = a.ok & x.ok & np.isfinite(a.cache_queries + a.cache_hits + x.cache_queries
                                          + x.cache_hits)
        p = f"chd.{arm}."
        out |= {p + "n": valid.astype(float), p + "ha": np.where(valid, a.cache_hits, 0.0),
                p + "qa": np.where(valid, a.cache_queries, 0.0),
                p + "hx": np.where(valid, x.cache_hits, 0.0),
                p + "qx": np.where(valid, x.cache_queries, 0.0)}
    return out


def _chd(ha, qa, hx, qx):
    h_a = ha / qa
    # a baseline hit rate of 0 gives inf / nan: the figure becomes not computable
    return np.abs(hx / qx - h_a) / np.where(h_a == 0, np.nan, h_a)


def _stat(arm: str) -> SumStat:
    p = f"chd.{arm}."
    return SumStat(_chd, (p + "ha", p + "qa", p + "hx", p + "qx"), p + "n",
                   "no prefix-cache report in the extension, or a baseline hit rate of 0")


def figures(table: SumTable, al: Aligned, scrapes: Sequence[MetricsScrape],
            config: MetricsConfig) -> list[Figure]:
    arms = compared_arms(al)
    out: list[Figure] = []
    h_a, why_a = hit_rate(scrapes, BASELINE)
    floor = None
    if BASELINE2 in arms:
        floor = delta(h_a, hit_rate(scrapes, BASELINE2)[0])[0]
    for arm in arms:
        per = estimate(table, _stat(arm), al.scenario_names, config, NAME, arm)
        overall, scenarios = per[0], per[1:]
        h_x, why_x = hit_rate(scrapes, arm)
        value, why = delta(h_a, h_x)
        n = int(al.arms[BASELINE].present.sum())
        status, reason = status_for(value, n, config.min_samples, why_a or why_x or why)
        out.append(Figure(NAME, value, arm, OVERALL, n=n, status=status, reason=reason,
                          noise_floor=floor if arm == CANDIDATE else None,
                          detail={"h_baseline": h_a, f"h_{arm}": h_x, "source": "scrapes",
                                  "from_extension": overall.value}))
        out += [Figure(**{**f.__dict__, "detail": {"source": "extension"}}) for f in scenarios]
    return out
