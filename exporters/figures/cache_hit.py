"""Cache-hit delta: CHD = |h_X - h_A| / h_A, h = prefix-cache hit rate of an arm.

Overall, h comes from each arm's `/metrics` scraped before and after the run (counter
deltas), as docs/METRICS.md defines it. Counters give one number per arm and no spread, so the
CI is the paired bootstrap of the same ratio from the per-request numbers
(`prefix_cache_hit_tokens` / `prefix_cache_query_tokens`: the `layergate` extension's, or the
cached tokens of the answer's usage, which vLLM reports with --enable-prompt-tokens-details;
ArmResult.per_request); an arm with neither has a point value only. Per scenario the
counters cannot tell scenarios apart, so there h comes from the per-request numbers alone.
The counters read are the one table in exporters/prom_text.py; an arm without them (no
/metrics endpoint, or a server that exposes no prefix-cache counter) makes the figure not
computable, and the reason says which.
The candidate's figure also carries its excess over the noise floor (baseline2 against the
baseline) with the interval of that difference from the same resamples.
A baseline hit rate of 0, or absent counters, makes the figure not computable, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from layergate.exporters.catalogue import BASELINE, BASELINE2, CACHE_HIT_DELTA, CANDIDATE, arm_lacks
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.figures.aligned import ANSWERS, Aligned, compared_arms
from layergate.exporters.figures.bootstrap import SumTable
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate, status_for
from layergate.exporters.prom_text import (
    cache_counters,
    has_metrics_endpoint,
    server_without_counters,
)
from layergate.exporters.records import MetricsScrape


def hit_rate(scrapes: Sequence[MetricsScrape], arm: str) -> tuple[float | None, str]:
    """(Δhits / Δqueries over the run, "") or (None, why not)."""
    by_when = {s.when: s for s in scrapes if s.arm == arm}
    missing = [w for w in ("before", "after") if w not in by_when]
    if missing:
        return None, f"no {' / '.join(missing)} scrape of arm {arm!r}"
    texts = [by_when[w].text for w in ("before", "after")]
    if not all(map(has_metrics_endpoint, texts)):
        return None, arm_lacks(arm, "metrics_endpoint")
    before, after = map(cache_counters, texts)
    if before is None or after is None:
        server = server_without_counters(texts[-1])
        return None, arm_lacks(arm, "cache_counters") + (f" ({server})" if server else "")
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


def _stat(al: Aligned, arm: str) -> SumStat:
    p = f"chd.{arm}."
    return SumStat(_chd, (p + "ha", p + "qa", p + "hx", p + "qx"), p + "n",
                   "no per-request prefix-cache numbers, or a baseline hit rate of 0")


def figures(table: SumTable, al: Aligned, scrapes: Sequence[MetricsScrape],
            config: MetricsConfig) -> list[Figure]:
    arms = compared_arms(al)
    out: list[Figure] = []
    h_a, why_a = hit_rate(scrapes, BASELINE)
    floor = None
    if BASELINE2 in arms:
        floor = delta(h_a, hit_rate(scrapes, BASELINE2)[0])[0]
    for arm in arms:
        noise = _stat(al, BASELINE2) if arm == CANDIDATE and BASELINE2 in arms else None
        per = estimate(table, _stat(al, arm), al.scenario_names, config, CACHE_HIT_DELTA, arm,
                       noise=noise)
        overall, scenarios = per[0], per[1:]
        h_x, why_x = hit_rate(scrapes, arm)
        value, why = delta(h_a, h_x)
        n = int(al.arms[BASELINE].present.sum())
        status, reason = status_for(value, n, config.min_samples, why_a or why_x or why)
        # counters give no spread: the CI is the per-request bootstrap of the same ratio
        low, high = _widen(value, (overall.ci_low, overall.ci_high))
        detail = {"h_baseline": h_a, f"h_{arm}": h_x, "source": "scrapes",
                  "from_answers": overall.value,
                  "ci_source": "per-request answers, bootstrap" if low is not None else None}
        if arm == CANDIDATE and floor is not None and value is not None:
            # the excess over the noise floor: the point from the scrapes, its interval from
            # the same per-request resamples (A' vs A is as timing-dependent as B vs A)
            e_low, e_high = _widen(value - floor, overall.detail.get("excess_ci") or (None, None))
            detail["excess"] = value - floor
            detail["excess_ci"] = None if e_low is None else [e_low, e_high]
        out.append(Figure(CACHE_HIT_DELTA, value, arm, OVERALL, ci_low=low, ci_high=high, n=n,
                          status=status, reason=reason,
                          noise_floor=floor if arm == CANDIDATE else None, detail=detail))
        out += [Figure(**{**f.__dict__, "detail": {**f.detail, "source": ANSWERS}})
                for f in scenarios]
    return out


def _widen(point: float | None, ci: Sequence[float | None]
           ) -> tuple[float | None, float | None]:
    """`ci` widened to contain `point` (the scrape value) when the two sources disagree, so
    the interval never claims more than either; (None, None) when either is missing."""
    low, high = ci
    if point is None or low is None or high is None:
        return None, None
    return min(low, point), max(high, point)
