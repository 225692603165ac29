"""Live Prometheus metrics of a replay (`--metrics-port`), names from docs/CONTRACTS.md.

Served by the *parent* process, not by Locust: the parent tails the results store, which
Locust's master writes for every worker (local or on other hosts), so one endpoint covers
all workers and the figures match the store.
Labels are `arm` and `scenario` (+ `status`) only; the registry is injected.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from layergate.exporters.catalogue import BASELINE, same_output
from layergate.exporters.records import ArmResult

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   120.0)


class ReplayMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("arm", "scenario")
        self.requests = Counter("layergate_replay_requests_total", "Replayed requests per arm",
                                (*labels, "status"), registry=registry)
        self.tokens = Counter("layergate_replay_output_tokens_total", "Output tokens received",
                              labels, registry=registry)
        self.ttft = Histogram("layergate_replay_ttft_seconds", "TTFT from the intended send",
                              labels, buckets=LATENCY_BUCKETS, registry=registry)
        self.tpot = Histogram("layergate_replay_tpot_seconds", "Time per output token",
                              labels, buckets=LATENCY_BUCKETS, registry=registry)
        self.e2e = Histogram("layergate_replay_e2e_seconds", "E2E from the intended send",
                             labels, buckets=LATENCY_BUCKETS, registry=registry)
        self.compared = Counter("layergate_replay_compared_total",
                                "Requests complete on both this arm and the baseline",
                                labels, registry=registry)
        self.exact = Counter("layergate_replay_exact_match_total",
                             "Compared requests whose output equals the baseline's",
                             labels, registry=registry)
        self._pending: dict[str, dict[str, ArmResult]] = {}

    def observe(self, result: ArmResult) -> None:
        arm, scenario = result.arm, result.scenario
        self.requests.labels(arm, scenario, "ok" if result.ok else "error").inc()
        if not result.ok:
            return
        if result.tokens_counted:  # a count of characters is no count of tokens
            self.tokens.labels(arm, scenario).inc(result.output_tokens)
        if result.ttft_s is not None:
            self.ttft.labels(arm, scenario).observe(result.ttft_s)
        if result.tpot_s is not None:
            self.tpot.labels(arm, scenario).observe(result.tpot_s)
        if result.e2e_s is not None:
            self.e2e.labels(arm, scenario).observe(result.e2e_s)
        self._compare(result)

    def _compare(self, result: ArmResult) -> None:
        seen = self._pending.setdefault(result.request_id, {})
        seen[result.arm] = result
        base = seen.get(BASELINE)
        if base is None:
            return
        others = [r for a, r in seen.items() if a != BASELINE]
        for other in others:
            self.compared.labels(other.arm, other.scenario).inc()
            if same_output(base, other):
                self.exact.labels(other.arm, other.scenario).inc()
            del seen[other.arm]
