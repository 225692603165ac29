"""The engine's Prometheus metrics (names fixed in docs/CONTRACTS.md), on an injected registry."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

# CPU latencies: a 135M model decodes a token in tens of ms, a long request takes seconds
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                   7.5, 10.0, 20.0, 30.0, 60.0)
DECISION_BUCKETS = (0.00001, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)
BATCH_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64)
# layers per output token: fine-grained up to SmolLM2's 30, coarser for deeper models
LAYER_BUCKETS = (*range(2, 31, 2), 32, 40, 48, 64, 80, 96, 128)
MEMORY_BUCKETS = tuple(float(2**n) for n in range(16, 36, 2))  # 64 KiB .. 16 GiB


@dataclass(frozen=True)
class RequestRecord:
    """What the engine reports of one finished request."""

    status: str  # ok / error / cancelled / rejected
    finish_reason: str
    prompt_tokens: int
    generation_tokens: int
    ttft_s: float | None
    e2e_s: float
    queue_time_s: float
    decision_time_s: float
    layers_executed: int  # layer x token, summed over the request's output tokens
    layers_skipped: int
    layers_would_skip: int
    prefix_query_tokens: int
    prefix_hit_tokens: int
    draft_proposed: int
    draft_accepted: int
    draft_steps: int
    peak_memory_bytes: int


class EngineMetrics:
    """Every engine family carries the `policy` label (the skip policy's name); the arm comes
    from the scrape config."""

    def __init__(self, registry: CollectorRegistry, skip_policy: str) -> None:
        self.policy = skip_policy  # the value of the `policy` label
        ProcessCollector(registry=registry)

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, ("policy", *extra), registry=registry)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, ("policy",), buckets=buckets, registry=registry)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, ("policy",), registry=registry)

        self.requests = counter("layergate_requests", "Finished requests.",
                                ("status", "finish_reason"))
        self.prompt_tokens = counter("layergate_prompt_tokens", "Prompt tokens of requests.")
        self.generation_tokens = counter("layergate_generation_tokens", "Generated tokens.")
        self.ttft = histogram("layergate_time_to_first_token_seconds",
                              "Arrival to first token.", LATENCY_BUCKETS)
        self.tpot = histogram("layergate_time_per_output_token_seconds",
                              "(E2E - TTFT) / (output tokens - 1).", LATENCY_BUCKETS)
        self.e2e = histogram("layergate_e2e_request_latency_seconds",
                             "Arrival to last token.", LATENCY_BUCKETS)
        self.queue_time = histogram("layergate_queue_time_seconds",
                                    "Arrival to admission into the running batch.",
                                    LATENCY_BUCKETS)
        self.prefix_queries = counter("layergate_prefix_cache_queries",
                                      "Prompt tokens looked up in the prefix cache.")
        self.prefix_hits = counter("layergate_prefix_cache_hits",
                                   "Prompt tokens served from the prefix cache.")
        self.layers_executed = counter("layergate_layers_executed",
                                       "Decoder layers executed, summed over output tokens.")
        self.layers_skipped = counter("layergate_layers_skipped",
                                      "Decoder layers skipped, summed over output tokens.")
        self.layers_would_skip = counter("layergate_layers_would_skip",
                                         "Layers a dry-run policy would have skipped "
                                         "(per output token).")
        self.decision = histogram("layergate_policy_decision_seconds",
                                  "Detector + decider time per request.", DECISION_BUCKETS)
        self.draft = counter("layergate_draft_tokens", "Draft tokens proposed.")
        self.draft_accepted = counter("layergate_draft_accepted_tokens",
                                      "Draft tokens accepted by verification.")
        self.drafts = counter("layergate_drafts", "Drafts verified (one verification pass "
                              "each; mean accepted length = 1 + accepted / drafts).")
        self.batch_size = histogram("layergate_batch_size", "Sequences per forward step.",
                                    BATCH_BUCKETS)
        self.real_tokens = counter("layergate_real_tokens", "Real token positions computed.")
        self.computed_tokens = counter("layergate_computed_tokens",
                                       "Token positions computed, padding included.")
        self.padding_efficiency = gauge("layergate_padding_efficiency",
                                        "Real / computed token positions of the last batch.")
        self.queue_depth = gauge("layergate_queue_depth", "Requests waiting.")
        self.running = gauge("layergate_running_requests", "Requests being decoded.")
        self.peak_memory = histogram("layergate_peak_memory_bytes",
                                     "Peak memory per request (KV + activations on CPU).",
                                     MEMORY_BUCKETS)
        # per request: mean layers executed per output token. Speculative decoding can exceed
        # the model's depth (draft + verify passes), hence the buckets past 30.
        self.request_layers = histogram("layergate_request_layers_executed",
                                        "Mean layers executed per output token, per request.",
                                        LAYER_BUCKETS)
        self._initialise()

    def _initialise(self) -> None:
        """Export zero-valued children so rates exist before the first request."""
        p = self.policy
        for c in (self.prompt_tokens, self.generation_tokens, self.prefix_queries,
                  self.prefix_hits, self.layers_executed, self.layers_skipped,
                  self.layers_would_skip, self.draft, self.draft_accepted, self.drafts,
                  self.real_tokens,
                  self.computed_tokens):
            c.labels(p)
        for h in (self.ttft, self.tpot, self.e2e, self.queue_time, self.decision,
                  self.batch_size, self.peak_memory, self.request_layers):
            h.labels(p)
        self.queue_depth.labels(p).set(0)
        self.running.labels(p).set(0)
        self.padding_efficiency.labels(p).set(1.0)

    def record_request(self, r: RequestRecord) -> None:
        p = self.policy
        self.requests.labels(p, r.status, r.finish_reason).inc()
        self.prompt_tokens.labels(p).inc(r.prompt_tokens)
        self.generation_tokens.labels(p).inc(r.generation_tokens)
        self.queue_time.labels(p).observe(r.queue_time_s)
        if r.status not in ("ok",):
            return
        self.e2e.labels(p).observe(r.e2e_s)
        if r.ttft_s is not None:
            self.ttft.labels(p).observe(r.ttft_s)
            if r.generation_tokens > 1:
                self.tpot.labels(p).observe((r.e2e_s - r.ttft_s) / (r.generation_tokens - 1))
        self.decision.labels(p).observe(r.decision_time_s)
        self.layers_executed.labels(p).inc(r.layers_executed)
        self.layers_skipped.labels(p).inc(r.layers_skipped)
        self.layers_would_skip.labels(p).inc(r.layers_would_skip)
        self.draft.labels(p).inc(r.draft_proposed)
        self.draft_accepted.labels(p).inc(r.draft_accepted)
        self.drafts.labels(p).inc(r.draft_steps)
        self.peak_memory.labels(p).observe(r.peak_memory_bytes)
        if r.generation_tokens > 0:
            self.request_layers.labels(p).observe(r.layers_executed / r.generation_tokens)

    def record_prefix(self, query_tokens: int, hit_tokens: int) -> None:
        self.prefix_queries.labels(self.policy).inc(query_tokens)
        self.prefix_hits.labels(self.policy).inc(hit_tokens)

    def record_batch(self, size: int, real: int, computed: int) -> None:
        p = self.policy
        self.batch_size.labels(p).observe(size)
        self.real_tokens.labels(p).inc(real)
        self.computed_tokens.labels(p).inc(computed)
        if computed:
            self.padding_efficiency.labels(p).set(real / computed)

    def record_load(self, queue_depth: int, running: int) -> None:
        self.queue_depth.labels(self.policy).set(queue_depth)
        self.running.labels(self.policy).set(running)

    def rejected(self) -> None:
        self.requests.labels(self.policy, "rejected", "none").inc()
