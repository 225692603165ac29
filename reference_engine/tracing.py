"""OpenTelemetry spans per request, with the GenAI semantic-convention attributes.

One SERVER span per request (parented on the caller's W3C `traceparent` when there is one),
with `queue`, `prefill` and `decode` children placed from the engine's own timings in the
finish event. The provider comes from the shared setup (exporters/otlp.py: OTLP/HTTP when
`OTEL_EXPORTER_OTLP_ENDPOINT` is set); without one the tracer is a no-op and costs nothing.
It is passed in, never set globally, so tests can read spans back with an in-memory
exporter.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from layergate.exporters.otlp import PROPAGATOR
from layergate.reference_engine.api import FinishEvent, SamplingParams

GEN_AI_SYSTEM = "layergate"
SERVICE_NAME = "layergate-engine"  # the spans' service without OTEL_SERVICE_NAME
_PHASES = (("queue", "queue_time_s"), ("prefill", "prefill_time_s"), ("decode", "decode_time_s"))


class RequestTracer:
    def __init__(self, provider: trace.TracerProvider | None, model: str) -> None:
        source = provider or trace.NoOpTracerProvider()
        self._tracer = source.get_tracer("reference_engine")
        self.model = model

    def start(self, operation: str, headers: Mapping[str, str]) -> RequestTrace:
        """`operation` is the GenAI operation name: `chat` or `text_completion`."""
        parent = PROPAGATOR.extract(carrier=headers)
        start_ns = time.time_ns()
        span = self._tracer.start_span(
            f"{operation} {self.model}", context=parent, kind=SpanKind.SERVER,
            start_time=start_ns,
            attributes={"gen_ai.operation.name": operation, "gen_ai.system": GEN_AI_SYSTEM,
                        "gen_ai.provider.name": GEN_AI_SYSTEM,
                        "gen_ai.request.model": self.model})
        return RequestTrace(self._tracer, span, self.model, start_ns)


class RequestTrace:
    """The span of one request, from acceptance to its finish event."""

    def __init__(self, tracer: trace.Tracer, span: Span, model: str, start_ns: int) -> None:
        self._tracer = tracer
        self.span = span
        self.model = model
        self.context = trace.set_span_in_context(span)  # parents the engine's spans
        self._start_ns = start_ns  # the request's arrival, which engine timings count from
        self._submitted = False
        self._ended = False

    def submitted(self, request_id: str, params: SamplingParams, prompt_tokens: int) -> None:
        self._submitted = True
        attrs: dict[str, Any] = {
            "gen_ai.response.id": request_id,
            "gen_ai.request.max_tokens": params.max_tokens,
            "gen_ai.request.temperature": params.temperature,
            "gen_ai.request.top_p": params.top_p,
            "gen_ai.usage.input_tokens": prompt_tokens,
        }
        if params.seed is not None and -(2**63) <= params.seed < 2**63:  # OTLP ints are int64
            attrs["gen_ai.request.seed"] = params.seed
        if params.stop:
            attrs["gen_ai.request.stop_sequences"] = list(params.stop)
        self.span.set_attributes(attrs)

    def finish(self, event: FinishEvent) -> None:
        ext = event.extension
        self.span.set_attributes({
            "gen_ai.response.model": self.model,
            "gen_ai.usage.input_tokens": event.prompt_tokens,
            "gen_ai.usage.output_tokens": event.completion_tokens,
            "gen_ai.response.finish_reasons": [event.finish_reason],
        })
        for key in ("policy", "mean_layers_executed", "theoretical_saving",
                    "prefix_cache_hit_tokens"):
            if ext.get(key) is not None:
                self.span.set_attribute(f"layergate.{key}", ext[key])
        self._phases(ext)
        if event.finish_reason == "error":
            self.span.set_status(Status(StatusCode.ERROR, event.error or "engine error"))
        self.end()

    def _phases(self, ext: Mapping[str, Any]) -> None:
        """Children laid end to end from arrival, by the engine's own durations (queue time
        counts from arrival, so it includes tokenizing the prompt)."""
        if not self._submitted:
            return
        start = self._start_ns
        for name, key in _PHASES:
            seconds = ext.get(key)
            if not isinstance(seconds, int | float) or seconds < 0:
                continue
            end = start + int(seconds * 1e9)
            child = self._tracer.start_span(name, context=self.context, start_time=start)
            child.end(end_time=end)
            start = end

    def fail(self, message: str, status: int | None = None) -> None:
        if self._ended:
            return
        if status is not None:
            self.span.set_attribute("http.response.status_code", status)
        self.span.set_attribute("error.type", str(status) if status else "error")
        self.span.set_status(Status(StatusCode.ERROR, message))
        self.end()

    def end(self) -> None:
        if not self._ended:
            self._ended = True
            self.span.end()
