"""A finished run's figures as OpenTelemetry metrics.

Observable gauges `layergate.run.<figure>` (+ `.ci_low` / `.ci_high`) with attributes
run / arm / scenario, and histograms of the per-request latencies (`layergate.run.ttft`,
`.tpot`, `.e2e`, unit s) with explicit bucket boundaries that fit LLM latencies (1 ms to
2 min; the SDK's default boundaries are made for milliseconds). Readers: Prometheus
(on an injected registry) and, when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, OTLP over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry

from layergate.exporters.catalogue import figure_spec, split_turn
from layergate.exporters.figures import Figure
from layergate.exporters.records import ArmResult

LATENCY_BOUNDARIES = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                      10.0, 30.0, 60.0, 120.0)
OTLP_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"


def _readers(registry: CollectorRegistry | None, otlp_endpoint: str | None,
             extra: Sequence[MetricReader]) -> list[MetricReader]:
    readers = list(extra)
    if registry is not None:
        # imported here: the Prometheus reader is only needed when serving
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        readers.append(PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False,
                                              registry=registry))
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        readers.append(PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=otlp_endpoint.rstrip("/") + "/v1/metrics"),
            export_interval_millis=10_000))
    return readers


class OtelRunExporter:
    """Publishes one run through an own MeterProvider (never the global one)."""

    def __init__(self, run_id: str, figures: Sequence[Figure], results: Iterable[ArmResult] = (),
                 registry: CollectorRegistry | None = None,
                 otlp_endpoint: str | None = None,
                 readers: Sequence[MetricReader] = ()) -> None:
        """`otlp_endpoint`: push over OTLP/HTTP there (the CLI passes $OTEL_EXPORTER_OTLP_ENDPOINT);
        `registry`: also expose through a Prometheus reader on it."""
        self.run_id = run_id
        self.figures = tuple(figures)
        view = View(instrument_type=Histogram,
                    aggregation=ExplicitBucketHistogramAggregation(LATENCY_BOUNDARIES))
        self.provider = MeterProvider(
            metric_readers=_readers(registry, otlp_endpoint, readers), views=[view],
            resource=Resource.create({"service.name": "layergate-metrics", "run": run_id}))
        meter = self.provider.get_meter("layergate.exporters")
        # a per-turn figure (`agreement_at_turn[3]`) is one instrument, its turn an attribute
        for name in sorted({split_turn(f.name)[0] for f in self.figures}):
            for suffix, attr in (("", "value"), (".ci_low", "ci_low"), (".ci_high", "ci_high")):
                meter.create_observable_gauge(f"layergate.run.{name}{suffix}",
                                              callbacks=[self._callback(name, attr)],
                                              description=f"{attr} of {name} "
                                                          f"({figure_spec(name).meaning})")
        self._record(meter, results)

    def _callback(self, name: str, attr: str):
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            for f in self.figures:
                value = getattr(f, attr)
                base, turn = split_turn(f.name)
                if base == name and value is not None:
                    attrs = {"run": self.run_id, "arm": f.arm, "scenario": f.scenario}
                    yield Observation(float(value), attrs if turn is None
                                      else {**attrs, "turn": turn})
        return observe

    def _record(self, meter, results: Iterable[ArmResult]) -> None:
        hist = {kind: meter.create_histogram(f"layergate.run.{kind}", unit="s",
                                             description=f"{kind.upper()} per request")
                for kind in ("ttft", "tpot", "e2e")}
        for r in results:
            if not r.ok or r.repeat:
                continue
            attrs = {"run": self.run_id, "arm": r.arm, "scenario": r.scenario}
            for kind, value in (("ttft", r.ttft_s), ("tpot", r.tpot_s), ("e2e", r.e2e_s)):
                if value is not None:
                    hist[kind].record(value, attrs)

    def flush(self, timeout_ms: float = 10_000) -> bool:
        return self.provider.force_flush(timeout_ms)

    def shutdown(self) -> None:
        self.provider.shutdown()


def push_run(run_id: str, figures: Sequence[Figure], results: Iterable[ArmResult],
             environ: Mapping[str, str]) -> str | None:
    """Push one run's figures and latencies once over OTLP when `environ` names an endpoint
    ($OTEL_EXPORTER_OTLP_ENDPOINT): what happened, in words; None when it names none."""
    endpoint = environ.get(OTLP_ENV)
    if not endpoint:
        return None
    exporter = OtelRunExporter(run_id, figures, results, otlp_endpoint=endpoint)
    pushed = exporter.flush()
    exporter.shutdown()
    return f"{'pushed' if pushed else 'could not push'} the figures to {endpoint} (OTLP)"
