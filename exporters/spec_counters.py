"""Read speculative-decoding counters out of a `/metrics` scrape (Prometheus text format).

`SPEC_COUNTERS` is the one table of the names layergate reads, per server, with where they
come from (docs/SERVERS.md lists them). layergate's engine and vLLM count drafts, draft
tokens and accepted tokens: counter deltas over a run give all three figures. SGLang counts
verification calls and generated tokens (their deltas give its accept length, as SGLang
defines it: tokens per verification) and publishes the acceptance rate and accept length as
gauges over its last logging window (the value at the run's last scrape). Counter samples
are summed over all label sets; a gauge's are averaged (every tensor-parallel rank
publishes the same figure).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from layergate.exporters.prom_text import sample_totals


@dataclass(frozen=True)
class SpecNames:
    """One server's speculative metrics: the first sample name found of each tuple."""

    server: str
    drafts: tuple[str, ...] = ()  # counter: drafts verified (one verification pass each)
    draft_tokens: tuple[str, ...] = ()  # counter: draft tokens proposed
    accepted: tuple[str, ...] = ()  # counter: draft tokens accepted
    emitted: tuple[str, ...] = ()  # counter: output tokens generated
    accept_length_gauge: tuple[str, ...] = ()  # gauge: mean accepted length, as published
    acceptance_rate_gauge: tuple[str, ...] = ()  # gauge: acceptance rate, as published
    documented: str = ""


SPEC_COUNTERS = (
    SpecNames("layergate", ("layergate_drafts_total",), ("layergate_draft_tokens_total",),
              ("layergate_draft_accepted_tokens_total",),
              ("layergate_generation_tokens_total",), documented="docs/CONTRACTS.md"),
    # the `_total` suffix depends on the prometheus_client version vLLM runs with
    SpecNames("vLLM", ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts"),
              ("vllm:spec_decode_num_draft_tokens_total",
               "vllm:spec_decode_num_draft_tokens"),
              ("vllm:spec_decode_num_accepted_tokens_total",
               "vllm:spec_decode_num_accepted_tokens"),
              ("vllm:generation_tokens_total", "vllm:generation_tokens"),
              documented="vllm/v1/spec_decode/metrics.py (SpecDecodingProm): acceptance rate "
                         "= accepted / draft tokens, mean acceptance length = 1 + accepted "
                         "/ drafts"),
    SpecNames("SGLang", drafts=("sglang:spec_verify_calls_total",),
              emitted=("sglang:generation_tokens_total",),
              accept_length_gauge=("sglang:spec_accept_length",),
              acceptance_rate_gauge=("sglang:spec_accept_rate",),
              documented="sglang/srt/observability/metrics_collector.py (0.5.23): counters "
                         "per finished request (accept length = generation tokens / verify "
                         "calls), gauges over the scheduler's last logging window"),
)


@dataclass(frozen=True)
class SpecCounters:
    """What one scrape says: counters (None where the server has no such counter) and
    gauges (None where it publishes none)."""

    server: str
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    emitted: float | None = None
    accept_length: float | None = None
    acceptance_rate: float | None = None


def _first(totals: dict[str, float], names: tuple[str, ...]) -> float | None:
    return next((totals[name] for name in names if name in totals), None)


def _gauge_means(text: str) -> dict[str, float]:
    """Mean of every gauge sample's value per sample name (the text parses: sample_totals
    read it first)."""
    seen: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        if family.type == "gauge":
            for sample in family.samples:
                seen.setdefault(sample.name, []).append(float(sample.value))
    return {name: sum(v) / len(v) for name, v in seen.items()}


def spec_counters(text: str, server: str | None = None) -> SpecCounters | None:
    """The speculative metrics of a scrape, or None when its server publishes none. With
    `server`, that server's names whatever the scrape shows (a scrape before a run may
    not show a counter yet: its other counters still count from there)."""
    totals = sample_totals(text)
    gauges = _gauge_means(text)
    for s in SPEC_COUNTERS:
        if server is not None and s.server != server:
            continue
        got = SpecCounters(s.server, _first(totals, s.drafts), _first(totals, s.draft_tokens),
                           _first(totals, s.accepted), _first(totals, s.emitted),
                           _first(gauges, s.accept_length_gauge),
                           _first(gauges, s.acceptance_rate_gauge))
        if server is not None or any(
                v is not None for v in (got.drafts, got.draft_tokens, got.accept_length)):
            return got
    return None
