"""A stand-in for a vLLM server's /metrics: the families, names and labels vLLM documents
(docs.vllm.ai "Production Metrics" and design/metrics), fed by simulated requests.

vLLM cannot run here (no GPU), so this serves only its metric surface: histograms
`vllm:e2e_request_latency_seconds`, `vllm:time_to_first_token_seconds`,
`vllm:request_time_per_output_token_seconds` and counters `vllm:request_success`
(label finished_reason), `vllm:prefix_cache_queries`, `vllm:prefix_cache_hits`, all with
labels model_name and engine, plus the API server's `http_requests_total` (handler, method,
status "2xx"/"5xx", from prometheus-fastapi-instrumentator). A background thread "serves"
`rate` requests a second with log-normal latencies; `slowdown` and `error_share` can be
changed while it runs (a canary turning bad).
"""

from __future__ import annotations

import threading

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from layergate.harness.processes import free_port

# vLLM's own bucket boundaries (vllm/v1/metrics/loggers.py)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
               60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                5.0, 7.5, 10.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
LABELS = ("model_name", "engine")


class FakeVllm:
    def __init__(self, model_name: str, rate: float = 40.0, seed: int = 0) -> None:
        self.model_name, self.rate = model_name, rate
        self.slowdown, self.error_share = 1.0, 0.0
        self.rng = np.random.default_rng(seed)
        self.registry = CollectorRegistry()
        r = self.registry
        self.e2e = Histogram("vllm:e2e_request_latency_seconds",
                             "Histogram of e2e request latency in seconds.", LABELS,
                             buckets=E2E_BUCKETS, registry=r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds",
                              "Histogram of time to first token in seconds.", LABELS,
                              buckets=TTFT_BUCKETS, registry=r)
        self.tpot = Histogram("vllm:request_time_per_output_token_seconds",
                              "Histogram of time_per_output_token_seconds per request.", LABELS,
                              buckets=TPOT_BUCKETS, registry=r)
        self.success = Counter("vllm:request_success", "Count of successfully processed "
                               "requests.", (*LABELS, "finished_reason"), registry=r)
        self.queries = Counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of "
                               "number of queried tokens.", LABELS, registry=r)
        self.hits = Counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number "
                            "of cached tokens.", LABELS, registry=r)
        self.http = Counter("http_requests_total", "Total number of requests by method, "
                            "status and handler.", ("handler", "method", "status"), registry=r)
        self.port = free_port()
        self._stop = threading.Event()
        self._server = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeVllm:
        self._server, _ = start_http_server(self.port, addr="127.0.0.1", registry=self.registry)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _run(self) -> None:
        labels = (self.model_name, "0")
        tick = 0.1
        while not self._stop.wait(tick):
            for _ in range(self.rng.poisson(self.rate * tick)):
                failed = self.rng.random() < self.error_share
                self.http.labels("/v1/chat/completions", "POST",
                                 "5xx" if failed else "2xx").inc()
                if failed:
                    continue
                ttft = self.rng.lognormal(np.log(0.08 * self.slowdown), 0.5)
                tokens = int(self.rng.integers(16, 128))
                tpot = self.rng.lognormal(np.log(0.02 * self.slowdown), 0.2)
                self.ttft.labels(*labels).observe(ttft)
                self.tpot.labels(*labels).observe(tpot)
                self.e2e.labels(*labels).observe(ttft + tpot * (tokens - 1))
                self.success.labels(*labels, "stop" if tokens < 120 else "length").inc()
                self.queries.labels(*labels).inc(200)
                self.hits.labels(*labels).inc(int(self.rng.binomial(200, 0.5)))
