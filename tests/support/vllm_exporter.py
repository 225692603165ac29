"""A stand-in for a vLLM server's /metrics, fed by simulated requests whose latencies and
errors a test can change while it runs (a canary turning bad), which the real server
(run by the suite in tests/test_vllm_arms.py) cannot be made to do on cue.

Its families, their help texts and the histograms' buckets are read from a /metrics page
recorded from a real vLLM 0.32 (tests/fixtures/metrics/vllm_spec_after.prom, whose header
says how): histograms `vllm:e2e_request_latency_seconds`, `vllm:time_to_first_token_seconds`,
`vllm:request_time_per_output_token_seconds` and counters `vllm:request_success`
(label finished_reason), `vllm:prefix_cache_queries`, `vllm:prefix_cache_hits`, all with
labels model_name and engine, plus the API server's `http_requests_total` (handler, method,
status "2xx"/"5xx", from prometheus-fastapi-instrumentator, which that recording did not
expose). A background thread "serves" `rate` requests a second with log-normal latencies;
`slowdown` and `error_share` can be changed while it runs.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm_spec_after.prom"


def recorded_families(path: Path = RECORDED) -> dict[str, Metric]:
    """The recorded page's metric families by name (counters without their `_total`)."""
    return {f.name: f for f in text_string_to_metric_families(path.read_text())}


def recorded_buckets(name: str, path: Path = RECORDED) -> tuple[float, ...]:
    """A recorded histogram's finite upper bounds, in order."""
    bounds = {float(s.labels["le"]) for s in recorded_families(path)[name].samples
              if s.name.endswith("_bucket")}
    return tuple(sorted(b for b in bounds if b != float("inf")))


def _help(name: str) -> str:
    return recorded_families()[name].documentation


E2E, TTFT = "vllm:e2e_request_latency_seconds", "vllm:time_to_first_token_seconds"
TPOT = "vllm:request_time_per_output_token_seconds"
SUCCESS, QUERIES, HITS = "vllm:request_success", "vllm:prefix_cache_queries", \
    "vllm:prefix_cache_hits"
E2E_BUCKETS, TTFT_BUCKETS, TPOT_BUCKETS = (recorded_buckets(n) for n in (E2E, TTFT, TPOT))
LABELS = ("model_name", "engine")


class FakeVllm:
    def __init__(self, model_name: str, rate: float = 40.0, seed: int = 0) -> None:
        self.model_name, self.rate = model_name, rate
        self.slowdown, self.error_share = 1.0, 0.0
        self.rng = np.random.default_rng(seed)
        self.registry = CollectorRegistry()
        r = self.registry
        self.e2e = Histogram(E2E, _help(E2E), LABELS, buckets=E2E_BUCKETS, registry=r)
        self.ttft = Histogram(TTFT, _help(TTFT), LABELS, buckets=TTFT_BUCKETS, registry=r)
        self.tpot = Histogram(TPOT, _help(TPOT), LABELS, buckets=TPOT_BUCKETS, registry=r)
        self.success = Counter(SUCCESS, _help(SUCCESS), (*LABELS, "finished_reason"),
                               registry=r)
        self.queries = Counter(QUERIES, _help(QUERIES), LABELS, registry=r)
        self.hits = Counter(HITS, _help(HITS), LABELS, registry=r)
        self.http = Counter("http_requests_total", "Total number of requests by method, "
                            "status and handler.", ("handler", "method", "status"), registry=r)
        self.port = 0  # the port the kernel gives when it starts: a free_port() could be taken
        self._stop = threading.Event()
        self._server = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeVllm:
        self._server, _ = start_http_server(0, addr="127.0.0.1", registry=self.registry)
        self.port = self._server.server_port
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
