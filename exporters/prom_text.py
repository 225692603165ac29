"""Read prefix-cache counters out of a `/metrics` scrape (Prometheus text format).

`CACHE_COUNTERS` is the one table of the counters layergate reads, per server, with where
their names come from; `NO_CACHE_COUNTERS` the servers known to expose none. Hits and
queries are both in prompt tokens, so hit rate = Δhits / Δqueries over a run. Samples are
summed over all label sets (every `policy`, `model_name`, `cache_source`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

# What the replay writes for an arm whose /metrics answered 404: a Prometheus comment, so
# the run directory itself says the arm has no metrics endpoint (not a failed scrape).
NO_METRICS_ENDPOINT = "# layergate: no /metrics endpoint"


@dataclass(frozen=True)
class CounterNames:
    """One server's prefix-cache counters: the first sample name found of each tuple."""

    server: str
    hits: tuple[str, ...]
    queries: tuple[str, ...]
    documented: str  # where the names come from


CACHE_COUNTERS = (
    CounterNames("layergate", ("layergate_prefix_cache_hits_total",),
                 ("layergate_prefix_cache_queries_total",), "docs/CONTRACTS.md"),
    # the `_total` suffix depends on the prometheus_client version vLLM runs with
    CounterNames("vLLM", ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"),
                 ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"),
                 "vLLM docs, design/metrics (v1 engine): prefix_cache_queries / _hits, in "
                 "tokens"),
    # cached_tokens_total has one series per cache_source (device, host, storage)
    CounterNames("SGLang", ("sglang:cached_tokens_total",), ("sglang:prompt_tokens_total",),
                 "SGLang docs, references/production_metrics: cached_tokens_total, "
                 "prompt_tokens_total (--enable-metrics)"),
)

# metric-name prefix -> the server, for those documented to expose no prefix-cache counter
NO_CACHE_COUNTERS = {
    "llamacpp:": "llama.cpp's llama-server (--metrics): llamacpp:prompt_tokens_total counts "
                 "processed prompt tokens only, with no cached-token counter",
    "tgi_": "Text Generation Inference: no prefix-cache metric among tgi_*",
}


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


def _first(totals: dict[str, float], names: tuple[str, ...]) -> str | None:
    return next((name for name in names if name in totals), None)


def cache_counters(text: str) -> CacheCounters | None:
    """The prefix-cache counters of a scrape, or None when it has none."""
    totals = sample_totals(text)
    for server in CACHE_COUNTERS:
        hits, queries = _first(totals, server.hits), _first(totals, server.queries)
        if hits is not None and queries is not None:
            return CacheCounters(totals[hits], totals[queries], hits)
    return None


def has_metrics_endpoint(text: str) -> bool:
    return not text.startswith(NO_METRICS_ENDPOINT)


def server_without_counters(text: str) -> str | None:
    """The server a scrape comes from, when it is one documented to have no prefix-cache
    counters (`NO_CACHE_COUNTERS`), else None."""
    names = sample_totals(text)
    return next((server for prefix, server in NO_CACHE_COUNTERS.items()
                 if any(name.startswith(prefix) for name in names)), None)
