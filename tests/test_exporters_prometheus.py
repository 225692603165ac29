"""Prometheus and OpenTelemetry export of run figures, checked with the real promtool and a
real OTLP/HTTP request; recording rules with `promtool test rules`."""

from __future__ import annotations

import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, generate_latest

from layergate.exporters.figures import Figure
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.otel_export import LATENCY_BOUNDARIES, OtelRunExporter
from layergate.exporters.prometheus_export import RunFiguresCollector, register_run
from layergate.exporters.records import ArmResult

pytestmark = [pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[1]


def _results(n: int = 30) -> list[ArmResult]:
    out = []
    for i in range(n):
        for arm, scale in (("baseline", 1.0), ("baseline2", 1.0), ("candidate", 0.7)):
            out.append(ArmResult(f"r{i}", arm, "short" if i % 2 else "long", True,
                                 ttft_s=0.05 * scale, e2e_s=(0.5 + i / 100) * scale,
                                 output_tokens=8, finish_reason="stop", output_text=f"t {i}",
                                 token_ids=(i, 1, 2)))
    return out


@pytest.fixture(scope="module")
def figures() -> list[Figure]:
    return compute_figures(_results(), config=MetricsConfig(n_resamples=100))


def _promtool_check(promtool: str, text: str) -> None:
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_run_collector_is_clean_for_promtool(figures, promtool_bin) -> None:
    registry = CollectorRegistry()
    thresholds = {("rer", "candidate", "all"): 0.2, ("exact_match", "candidate", "all"): 0.9}
    register_run(registry, "run-1", figures, thresholds, "fail", 1_700_000_000.0)
    text = generate_latest(registry).decode()
    _promtool_check(promtool_bin, text)
    rer = next(f for f in figures if (f.name, f.arm, f.scenario) == ("rer", "candidate", "all"))
    labels = {"run": "run-1", "arm": "candidate", "scenario": "all"}
    assert registry.get_sample_value("layergate_run_rer", labels) == rer.value
    assert registry.get_sample_value("layergate_run_rer_ci_low", labels) == rer.ci_low
    assert registry.get_sample_value("layergate_run_rer_threshold", labels) == 0.2
    assert registry.get_sample_value("layergate_run_verdict", {"run": "run-1"}) == 1
    assert registry.get_sample_value("layergate_run_verdict_timestamp_seconds",
                                     {"run": "run-1"}) == 1_700_000_000.0
    # only run / arm / scenario labels, and nothing not computable exported as NaN
    for line in text.splitlines():
        if line.startswith("layergate_run_") and "{" in line:
            keys = {kv.split("=")[0] for kv in line[line.index("{") + 1:line.index("}")]
                    .split(",")}
            assert keys <= {"run", "arm", "scenario"}, line
            assert "NaN" not in line
    assert 'layergate_run_token_kl{' not in text  # no logprobs in these results


def test_collector_rejects_an_unknown_verdict(figures) -> None:
    with pytest.raises(ValueError, match="verdict must be one of"):
        RunFiguresCollector("r", figures, verdict="maybe")


def test_otel_prometheus_reader_is_clean_for_promtool(figures, promtool_bin) -> None:
    registry, memory = CollectorRegistry(), InMemoryMetricReader()
    exporter = OtelRunExporter("run-1", figures, _results(), registry=registry,
                               otlp_endpoint=None, readers=[memory])
    try:
        text = generate_latest(registry).decode()
        _promtool_check(promtool_bin, text)
        assert 'layergate_run_rer{arm="candidate",run="run-1",scenario="all"}' in text
        assert 'layergate_run_e2e_seconds_bucket{arm="candidate",le="0.5",run="run-1",' \
               'scenario="long"}' in text
        names = {m.name for rm in memory.get_metrics_data().resource_metrics
                 for sm in rm.scope_metrics for m in sm.metrics}
        assert {"layergate.run.rer", "layergate.run.rer.ci_low", "layergate.run.e2e"} <= names
    finally:
        exporter.shutdown()


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_otlp_push_sends_figures_and_latency_buckets(figures) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        exporter = OtelRunExporter("run-1", figures, _results(),
                                   otlp_endpoint=f"http://127.0.0.1:{server.server_port}")
        assert exporter.flush()
        exporter.shutdown()
    finally:
        server.shutdown()
    assert _Receiver.bodies and _Receiver.bodies[0][0] == "/v1/metrics"
    request = ExportMetricsServiceRequest.FromString(_Receiver.bodies[0][1])
    metrics = {m.name: m for rm in request.resource_metrics for sm in rm.scope_metrics
               for m in sm.metrics}
    rer = [p for p in metrics["layergate.run.rer"].gauge.data_points
           if {a.key: a.value.string_value for a in p.attributes}
           == {"run": "run-1", "arm": "candidate", "scenario": "all"}]
    expect = next(f.value for f in figures
                  if (f.name, f.arm, f.scenario) == ("rer", "candidate", "all"))
    assert rer and rer[0].as_double == pytest.approx(expect)
    e2e = metrics["layergate.run.e2e"].histogram.data_points[0]
    assert tuple(e2e.explicit_bounds) == LATENCY_BOUNDARIES


def test_recording_rules_pass_promtool(promtool_bin) -> None:
    for args in (["check", "rules", "dashboards/rules.yml"],
                 ["test", "rules", "dashboards/rules.test.yml"]):
        proc = subprocess.run([promtool_bin, *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
