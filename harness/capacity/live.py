"""`capacity --metrics-port P`: the sweep's steps (exporters/capacity_export.py) and its
capacity figures so far (`layergate_run_<figure>`, as `metrics --serve` exports a run's),
served on P and updated after every step, on a registry of their own."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from layergate.exporters.capacity_export import CapacityStepsCollector
from layergate.exporters.figures import Figure
from layergate.exporters.metrics_server import serve_metrics
from layergate.exporters.prometheus_export import RunFiguresCollector
from layergate.harness.replay.config import ConfigError


class _Figures(Collector):
    def __init__(self, run_id: str) -> None:
        self.run_id, self.figures = run_id, ()

    def collect(self) -> Iterator[Metric]:
        yield from RunFiguresCollector(self.run_id, self.figures).collect()


class SweepMetrics:
    def __init__(self, port: int, host: str, run_id: str, attainment: float,
                 max_error_rate: float) -> None:
        self.registry = CollectorRegistry()
        self.steps = CapacityStepsCollector(run_id, attainment, max_error_rate)
        self.figures = _Figures(run_id)
        self.registry.register(self.steps)
        self.registry.register(self.figures)
        try:
            self.server = serve_metrics(self.registry, host, port)
        except OSError as exc:
            raise ConfigError(f"--metrics-port {port}: cannot listen: {exc}") from exc

    def update(self, steps: Sequence, figures: Sequence[Figure]) -> None:
        """`steps`: the sweep's `Step`s so far; `figures`: its capacity figures."""
        self.steps.update([(s.index, r) for s in steps for r in s.results])
        self.figures.figures = tuple(figures)

    def close(self) -> None:
        self.server.stop()
