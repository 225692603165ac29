"""Read prefix-cache counters out of a `/metrics` scrape (Prometheus text format).

Reference engine: `layergate_prefix_cache_{hits,queries}_total`; vLLM:
`vllm:prefix_cache_{hits,queries}` with or without `_total` (it changed across versions).
Samples are summed over all label sets (e.g. every `policy`).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

HITS = ("layergate_prefix_cache_hits_total", "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_hits")
QUERIES = ("layergate_prefix_cache_queries_total", "vllm:prefix_cache_queries_total",
           "vllm:prefix_cache_queries")


@dataclass(frozen=True)
class CacheCounters:
    hits: float
    queries: float
    source: str  # the sample name the hits came from


def sample_totals(text: str) -> dict[str, float]:
    """Sum of every sample's value per sample name; ValueError on unparsable text."""
    totals: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    except ValueError as exc:
        raise ValueError(f"unparsable Prometheus text: {exc}") from exc
    return totals


def cache_counters(text: str) -> CacheCounters | None:
    """The prefix-cache counters of a scrape, or None when it has none."""
    totals = sample_totals(text)
    for hits, queries in zip(HITS, QUERIES, strict=True):
        if hits in totals and queries in totals:
            return CacheCounters(totals[hits], totals[queries], hits)
    return None
