"""The one OTLP tracing setup (exporters/otlp.py), exporting to a real local OTLP/HTTP
receiver."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from layergate.exporters.otlp import exporting, tracer_provider_from_env
from tests.support.http_server import serving

ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    """http://127.0.0.1:PORT and the (path, body) of every POST it got."""
    got: list[tuple[str, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            got.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    with serving(Handler) as url:
        yield url.rstrip("/"), got


def test_nothing_is_set_up_without_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENDPOINTS:
        monkeypatch.delenv(name, raising=False)
    assert not exporting() and tracer_provider_from_env("svc") is None


@pytest.mark.parametrize("service", [None, "from-env"])
def test_spans_reach_the_endpoint_named_by_service(
        monkeypatch: pytest.MonkeyPatch, receiver, service: str | None) -> None:
    url, got = receiver
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    if service is None:
        monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    else:
        monkeypatch.setenv("OTEL_SERVICE_NAME", service)
    provider = tracer_provider_from_env("layergate-test")
    assert exporting() and provider is not None
    provider.get_tracer("test").start_span("one").end()
    provider.shutdown()  # flushes the batch
    [(path, body)] = got
    request = ExportTraceServiceRequest.FromString(body)
    [spans] = request.resource_spans
    names = {a.value.string_value for a in spans.resource.attributes if a.key == "service.name"}
    assert path == "/v1/traces" and names == {service or "layergate-test"}
    assert [s.name for s in spans.scope_spans[0].spans] == ["one"]
