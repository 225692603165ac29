"""One OpenTelemetry span per replayed request and arm, propagated to the arm.

The span's W3C `traceparent` goes out with the request, so an arm that traces (the
reference engine does) parents its own spans on the replayer's: one trace shows the
replayer's view and the engine's queue / prefill / decode for the same request.
Spans are exported over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. Without it no span is made, since nothing would
read it (the SDK's span cost the replayer more per request than the rest of its
bookkeeping, profiled): each request still carries a fresh sampled `traceparent`, so the
arm's own spans of one request still share a trace.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from layergate.exporters.otlp import PROPAGATOR, tracer_provider_from_env
from layergate.exporters.records import ArmResult


def replay_tracer() -> trace.Tracer | None:
    """The replayer's tracer when spans are exported (exporters/otlp.py), else None
    (`arm_span` then only propagates)."""
    provider = tracer_provider_from_env("layergate-replayer")
    return provider.get_tracer("layergate.harness.replay") if provider is not None else None


class Propagated:
    """No span, only a fresh sampled `traceparent` (random ids, as the SDK draws them)."""

    def __init__(self) -> None:
        self.headers = {"traceparent": f"00-{random.getrandbits(128) or 1:032x}-"
                                       f"{random.getrandbits(64) or 1:016x}-01"}

    def finish(self, result: ArmResult) -> None:
        pass

    def __enter__(self) -> Propagated:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class ArmSpan:
    """The span of one request on one arm: `headers` to send, `finish(result)` to end it."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.headers: dict[str, str] = {}
        PROPAGATOR.inject(self.headers, context=trace.set_span_in_context(span))

    def finish(self, result: ArmResult) -> None:
        attrs = {"layergate.ok": result.ok, "gen_ai.usage.input_tokens": result.prompt_tokens}
        if result.tokens_counted:
            attrs["gen_ai.usage.output_tokens"] = result.output_tokens
        if result.http_status is not None:
            attrs["http.response.status_code"] = result.http_status
        if result.ttft_s is not None:
            attrs["layergate.ttft_s"] = result.ttft_s
        if result.finish_reason:
            attrs["gen_ai.response.finish_reasons"] = (result.finish_reason,)
        self.span.set_attributes(attrs)
        if not result.ok:
            self.span.set_status(Status(StatusCode.ERROR, result.error or "failed"))


def arm_span(tracer: trace.Tracer | None, request_id: str, scenario: str, arm: str,
             endpoint: str) -> AbstractContextManager[ArmSpan | Propagated]:
    """A CLIENT span around sending `request_id` to `arm` (no request id as a metric label:
    ids belong on spans, never on Prometheus series); with no tracer, only a traceparent."""
    if tracer is None:
        return Propagated()
    return _span(tracer, request_id, scenario, arm, endpoint)


@contextmanager
def _span(tracer: trace.Tracer, request_id: str, scenario: str, arm: str,
          endpoint: str) -> Iterator[ArmSpan]:
    with tracer.start_as_current_span(
            f"replay {arm}", kind=SpanKind.CLIENT, record_exception=True,
            attributes={"layergate.request_id": request_id, "layergate.scenario": scenario,
                        "layergate.arm": arm, "url.path": endpoint}) as span:
        yield ArmSpan(span)
