"""Both arms' metrics over one window, from Prometheus's HTTP API.

Each value is `sum(increase(metric{selector}[window]))` evaluated at the window's end, so
counter resets (a restarted engine) are handled as Prometheus handles them, and both arms
are read for exactly the same interval. A window has no data when Prometheus cannot be
asked, when an arm's selector matches no series, or when an arm served fewer than
`min_requests` requests in it; the reason says which, in words an operator can act on.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from layergate.exporters.catalogue import BASELINE, CANDIDATE, LIVE_ARMS
from layergate.exporters.figures.canary import ArmWindow, Window
from layergate.harness.prometheus_api import PrometheusAPI, PrometheusError
from layergate.harness.watch.metric_map import EngineMetrics, MetricMapError


@dataclass(frozen=True)
class NoData:
    reason: str
    arm: str | None = None  # the arm whose data was missing (None: Prometheus itself)


def promql_duration(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


class PrometheusSource:
    """Reads windows for a baseline and a candidate selector through `engine`'s names."""

    def __init__(self, url: str, engine: EngineMetrics, selectors: dict[str, str],
                 min_requests: int = 1, timeout: float = 10.0) -> None:
        self.api = PrometheusAPI(url, timeout)
        self.engine, self.selectors = engine, selectors
        self.min_requests = min_requests
        self.traffic = "requests" if "requests" in engine.refs else "e2e_count"

    def close(self) -> None:
        self.api.close()

    def probe(self) -> dict[str, int] | NoData:
        """How many series each arm's selector matches now (0: nothing yet). Raises
        MetricMapError for a selector Prometheus refuses; NoData when it cannot be asked."""
        counts: dict[str, int] = {}
        for arm in LIVE_ARMS:
            got = self._query(f"count({{{self.selectors[arm]}}})", time.time())
            if isinstance(got, NoData):
                return got
            counts[arm] = int(got or 0)
        return counts

    def window(self, end: float, length: float) -> Window | NoData:
        """Both arms over [end - length, end]. Raises MetricMapError when Prometheus
        refuses a query as malformed (a bad selector: a usage error, not missing data)."""
        arms: dict[str, ArmWindow] = {}
        for arm in LIVE_ARMS:
            got = self._arm(arm, end, promql_duration(length))
            if isinstance(got, NoData):
                return got
            arms[arm] = got
        return Window(end - length, end, arms[BASELINE], arms[CANDIDATE])

    def _arm(self, arm: str, end: float, window: str) -> ArmWindow | NoData:
        selector = self.selectors[arm]
        values: dict[str, float] = {}
        for key, expr in self.engine.queries(selector, window).items():
            got = self._query(expr, end)
            if isinstance(got, NoData):
                return got
            if got is not None:
                values[key] = got
        traffic = values.get(self.traffic)
        name = self.engine.refs["requests" if self.traffic == "requests" else "e2e"].name
        if traffic is None:
            return NoData(f"the {arm} selector {{{selector}}} matches no {name} series "
                          f"(engine {self.engine.engine}): check --{arm} and --engine", arm)
        if traffic < self.min_requests:
            return NoData(f"the {arm} served {traffic:.0f} requests in the window "
                          f"(at least {self.min_requests} needed): is it receiving traffic?",
                          arm)
        return ArmWindow(values)

    def share(self, window: Window) -> float:
        """The candidate's share of both arms' traffic in a window, in percent."""
        a = window.baseline.get(self.traffic) or 0.0
        b = window.candidate.get(self.traffic) or 0.0
        return 100.0 * b / (a + b) if a + b > 0 else 0.0

    def controller_weight(self, expr: str, at: float, length: float
                          ) -> tuple[float, float, float] | None:
        """(weight, the time of its sample, its lowest over the `length` before `at`) of
        the controller's weight series; None when Prometheus has none or cannot be
        asked. The lowest says whether the whole window was served at the weight."""
        weight, stamp = self._query(expr, at), self._query(f"timestamp({expr})", at)
        # a subquery from the window's start (its first step is the weight then)
        low = self._query(f"min_over_time(({expr})[{promql_duration(length)}:"
                          f"{promql_duration(length / 8)}])", at)
        if not isinstance(weight, float) or not isinstance(stamp, float):
            return None
        return weight, stamp, low if isinstance(low, float) else weight

    def _query(self, expr: str, at: float) -> float | None | NoData:
        try:
            result = self.api.query(expr, at)
        except PrometheusError as exc:
            if exc.refused:
                raise MetricMapError(f"Prometheus refused {expr!r}: {exc.error}") from exc
            # the reason of a window, read by an operator: the same whichever query failed
            return NoData(exc.where)
        if not result:
            return None
        value = float(result[0]["value"][1])
        return value if math.isfinite(value) else None
