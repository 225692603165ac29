"""The one OpenTelemetry tracing setup, shared by the replayer (harness/replay/tracing.py)
and the engine (reference_engine/tracing.py): spans go over OTLP/HTTP when the standard
`OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) variable is set, named by
`OTEL_SERVICE_NAME` or the caller's default, and carried between them in W3C `traceparent`
headers. The provider is returned, never set globally, so tests read spans back with an
in-memory exporter."""

from __future__ import annotations

import os

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

PROPAGATOR = TraceContextTextMapPropagator()


def exporting() -> bool:
    """Whether spans have somewhere to go (the OTLP endpoint variables)."""
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def tracer_provider_from_env(service_name: str) -> TracerProvider | None:
    """A provider exporting over OTLP/HTTP when the variables ask for it, else None."""
    if not exporting():
        return None
    # imported here: the exporter pulls in protobuf, not worth it when nothing exports
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    name = os.environ.get("OTEL_SERVICE_NAME", service_name)
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider
