"""A capacity sweep's steps as Prometheus gauges (names in docs/CONTRACTS.md): per arm and
step, the offered load, the SLO attainment, the goodput, the error rate and the TTFT / TPOT
percentiles, and whether the arm passed. Labels `run`, `arm`, `step` (the step's index: a
ladder has tens of steps at most). A custom collector on an injected registry; `update`
swaps in the steps so far, so a sweep in progress serves each step as it completes."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from layergate.exporters.figures.capacity_step import PERCENTILES, StepArm

PREFIX = "layergate_capacity_step_"
LABELS = ("run", "arm", "step")


class CapacityStepsCollector(Collector):
    def __init__(self, run_id: str, attainment: float, max_error_rate: float) -> None:
        self.run_id, self.attainment, self.max_error_rate = run_id, attainment, max_error_rate
        self.steps: tuple[tuple[int, StepArm], ...] = ()

    def update(self, steps: Sequence[tuple[int, StepArm]]) -> None:
        """(step index, the arm at that step) for every stored step."""
        self.steps = tuple(steps)

    def collect(self) -> Iterator[Metric]:
        simple = {
            "load": ("Offered load of the step (requests/s open loop, users closed loop)",
                     lambda s: s.load),
            "slo_attainment": ("Share of the step's measured requests that met the SLO",
                               lambda s: s.attainment),
            "goodput_requests_per_second": ("Requests/s of the step that met the SLO",
                                            lambda s: s.goodput),
            "error_rate": ("Share of the step's measured requests that errored",
                           lambda s: s.error_rate),
            "passed": ("1 when the arm passed the step (SLO attainment, errors, saturation)",
                       lambda s: float(s.passes(self.attainment, self.max_error_rate))),
            "requests": ("Measured requests of the step (after its warm-up)", lambda s: s.n),
        }
        for name, (help_text, value) in simple.items():
            family = GaugeMetricFamily(PREFIX + name, help_text, labels=LABELS)
            for index, s in self.steps:
                family.add_metric((self.run_id, s.arm, str(index)), float(value(s)))
            yield family
        for kind in ("ttft", "tpot"):
            family = GaugeMetricFamily(f"{PREFIX}{kind}_seconds",
                                       f"{kind.upper()} percentiles of the step's measured "
                                       "requests", labels=(*LABELS, "quantile"))
            for index, s in self.steps:
                for q in PERCENTILES:
                    v = s.percentiles.get(f"{kind}_p{q}")
                    if v is not None:
                        family.add_metric((self.run_id, s.arm, str(index), str(q / 100)), v)
            yield family
