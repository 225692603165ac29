"""The replayer's span per request and arm, and the traceparent it sends to the arm."""

from __future__ import annotations

import re

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from layergate.exporters.otlp import exporting
from layergate.exporters.records import ArmResult
from layergate.harness.replay.tracing import Propagated, arm_span, replay_tracer

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-0[13]$")


def _tracer() -> tuple[InMemorySpanExporter, object]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, provider.get_tracer("test")


def test_span_per_arm_carries_its_traceparent() -> None:
    exporter, tracer = _tracer()
    for arm in ("baseline", "candidate"):
        with arm_span(tracer, "req-1", "short", arm, "/v1/chat/completions") as span:
            match = TRACEPARENT.match(span.headers["traceparent"])
            assert match, span.headers
            span.finish(ArmResult("req-1", arm, "short", ok=True, output_tokens=5,
                                  http_status=200, ttft_s=0.1, finish_reason="stop"))
    spans = exporter.get_finished_spans()
    assert [s.attributes["layergate.arm"] for s in spans] == ["baseline", "candidate"]
    assert len({s.context.span_id for s in spans}) == 2
    assert spans[0].attributes["gen_ai.usage.output_tokens"] == 5
    assert spans[0].attributes["layergate.request_id"] == "req-1"


def test_failed_arm_marks_the_span_as_error() -> None:
    exporter, tracer = _tracer()
    with arm_span(tracer, "req-2", "long", "candidate", "/v1/completions") as span:
        span.finish(ArmResult("req-2", "candidate", "long", ok=False,
                              error="connection failed: refused"))
    (finished,) = exporter.get_finished_spans()
    assert finished.status.status_code is StatusCode.ERROR
    assert "refused" in finished.status.description


def test_without_an_otlp_endpoint_no_span_is_made_yet_the_trace_propagates(
        monkeypatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    tracer = replay_tracer()
    assert tracer is None  # nothing would read a span: none is made
    ids = set()
    for arm in ("baseline", "candidate"):
        with arm_span(tracer, "req-3", "short", arm, "/v1/chat/completions") as span:
            assert isinstance(span, Propagated)
            match = TRACEPARENT.match(span.headers["traceparent"])
            assert match and match.group(0).endswith("-01"), span.headers  # sampled
            ids.add(match.groups())
            span.finish(ArmResult("req-3", arm, "short", ok=True))
    assert len(ids) == 2  # each request its own trace and span id


def test_either_otlp_endpoint_turns_spans_on(monkeypatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
        assert not exporting()
        monkeypatch.setenv(name, "http://127.0.0.1:4318")
        assert exporting()
