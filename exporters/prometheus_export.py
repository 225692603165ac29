"""A finished run's figures as Prometheus gauges (names in docs/CONTRACTS.md).

A custom collector: it holds the figures and yields fresh metric families on every
scrape, on a registry the caller injects. Labels are `run`, `arm`, `scenario`, and `turn`
on a per-turn figure (`agreement_at_turn[3]` is `layergate_run_agreement_at_turn` with
`turn="3"`; at most MAX_TURNS values, exporters/figures/turns.py). A figure without a value
(not computable) is left out rather than exported as NaN.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from layergate.exporters.catalogue import VERDICTS, exit_code, figure_spec, split_turn
from layergate.exporters.figures import Figure
from layergate.exporters.metrics_server import serve_metrics

PREFIX = "layergate_run_"
LABELS = ("run", "arm", "scenario")
TURN = "turn"  # the label of a per-turn figure's turn


def _named(name: str) -> tuple[str, tuple[str, ...]]:
    """(the metric's figure name, its extra label values): a per-turn figure's turn goes
    into the `turn` label."""
    base, turn = split_turn(name)
    return base, (() if turn is None else (str(turn),))


class RunFiguresCollector(Collector):
    """Gauges for one run: each figure, its CI bounds and (with a policy) its threshold,
    plus the verdict and when it was reached."""

    def __init__(self, run_id: str, figures: Sequence[Figure],
                 thresholds: Mapping[tuple[str, str, str], float] | None = None,
                 verdict: str | None = None, verdict_time: float | None = None) -> None:
        """`thresholds`: (figure name, arm, scenario) -> the gate policy's threshold."""
        if verdict is not None and verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        self.run_id = run_id
        self.figures = tuple(figures)
        self.thresholds = dict(thresholds or {})
        self.verdict = verdict
        self.verdict_time = verdict_time

    def _families(self, suffix: str, help_text: str, attr: str) -> dict[str, GaugeMetricFamily]:
        families: dict[str, GaugeMetricFamily] = {}
        for f in self.figures:
            value = getattr(f, attr)
            if value is None:
                continue
            base, turn = _named(f.name)
            name = f"{PREFIX}{base}{suffix}"
            if name not in families:
                spec = figure_spec(base)
                families[name] = GaugeMetricFamily(
                    name, help_text.format(name=base, meaning=spec.meaning, unit=spec.unit),
                    labels=LABELS + ((TURN,) if turn else ()))
            families[name].add_metric((self.run_id, f.arm, f.scenario, *turn), float(value))
        return families

    def collect(self) -> Iterator[Metric]:
        yield from self._families("", "{name} of a finished run ({unit}): {meaning}",
                                  "value").values()
        yield from self._families("_ci_low", "Lower CI bound of {name}", "ci_low").values()
        yield from self._families("_ci_high", "Upper CI bound of {name}", "ci_high").values()
        families: dict[str, GaugeMetricFamily] = {}
        for (name, arm, scenario), threshold in sorted(self.thresholds.items()):
            base, turn = _named(name)
            family = families.setdefault(base, GaugeMetricFamily(
                f"{PREFIX}{base}_threshold", f"Gate policy threshold of {base}",
                labels=LABELS + ((TURN,) if turn else ())))
            family.add_metric((self.run_id, arm, scenario, *turn), float(threshold))
        yield from families.values()
        if self.verdict is not None:
            codes = ", ".join(f"{int(exit_code(v))} {v}" for v in VERDICTS)
            verdict = GaugeMetricFamily(f"{PREFIX}verdict",
                                        f"Gate verdict as its exit code: {codes}",
                                        labels=("run",))
            verdict.add_metric((self.run_id,), int(exit_code(self.verdict)))
            yield verdict
            if self.verdict_time is not None:
                stamp = GaugeMetricFamily(f"{PREFIX}verdict_timestamp_seconds",
                                          "When the gate reached the verdict (Unix time)",
                                          labels=("run",))
                stamp.add_metric((self.run_id,), self.verdict_time)
                yield stamp


def register_run(registry: CollectorRegistry, run_id: str, figures: Sequence[Figure],
                 thresholds: Mapping[tuple[str, str, str], float] | None = None,
                 verdict: str | None = None, verdict_time: float | None = None
                 ) -> RunFiguresCollector:
    collector = RunFiguresCollector(run_id, figures, thresholds, verdict, verdict_time)
    registry.register(collector)
    return collector


def serve_until_stopped(collector: Collector, host: str, port: int,
                        on_ready: Callable[[int], None]) -> None:
    """Serve `collector` alone at http://HOST:PORT/metrics until SIGTERM or Ctrl-C;
    `on_ready` gets the port bound (0 picks a free one). An OSError when it cannot listen."""
    registry = CollectorRegistry()
    registry.register(collector)
    server = serve_metrics(registry, host, port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    on_ready(server.port)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
