"""The watch as Prometheus metrics (names in docs/CONTRACTS.md), on an injected registry.

`layergate_watch_state{state}` is 1 for the current state (watching, no_data, pass, fail,
inconclusive) and 0 for the others; `layergate_watch_stage_percent` the candidate's share;
per figure (label `figure`): `layergate_watch_figure` (the estimate over the stage),
`_low` / `_high` (its anytime-valid interval), `_threshold` (the policy's), `_last_window`
and `_decision` (1 decided good, -1 decided bad, 0 undecided). A value that does not exist
yet (an unbounded interval, a figure without data) is left out, never exported as NaN.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from layergate.exporters.catalogue import (
    ADVANCE,
    FAIL,
    INCONCLUSIVE,
    NO_DATA,
    PASS,
    ROLLBACK,
    WATCHING,
)
from layergate.harness.watch.board import DECISIONS, Board
from layergate.harness.watch.stages import StageFigure

STATES = (WATCHING, NO_DATA, PASS, FAIL, INCONCLUSIVE)
PREFIX = "layergate_watch_"


class WatchCollector(Collector):
    def __init__(self, board: Board) -> None:
        self.board = board

    def collect(self) -> Iterator[Metric]:
        snap = self.board.snapshot()
        s = snap.status
        state = GaugeMetricFamily(f"{PREFIX}state", "1 for the watch's current state",
                                  labels=("state",))
        for name in STATES:
            state.add_metric((name,), 1.0 if s.state == name else 0.0)
        yield state
        yield GaugeMetricFamily(f"{PREFIX}stage_percent",
                                "Share of traffic on the candidate in the stage watched",
                                value=s.stage)
        yield GaugeMetricFamily(f"{PREFIX}stage_windows", "Windows with data in this stage",
                                value=s.windows)
        yield GaugeMetricFamily(f"{PREFIX}missing_windows",
                                "Windows in a row without data", value=s.missing)
        yield GaugeMetricFamily(f"{PREFIX}figure_alpha",
                                "Error budget of each figure in each stage",
                                value=snap.alpha)
        if s.window_end is not None:
            yield GaugeMetricFamily(f"{PREFIX}last_window_timestamp_seconds",
                                    "End of the last window with data", value=s.window_end)
        transitions = CounterMetricFamily(f"{PREFIX}transitions",
                                          "Stage transitions decided", labels=("decision",))
        for decision in (ADVANCE, ROLLBACK):
            transitions.add_metric((decision,), sum(t.decision == decision
                                                    for t in snap.transitions))
        yield transitions
        yield from self._figures(s.figures)

    def _figures(self, figures: Sequence[StageFigure]) -> Iterator[Metric]:
        fams = {suffix: GaugeMetricFamily(f"{PREFIX}figure{suffix}", text, labels=("figure",))
                for suffix, text in (("", "Live figure over the stage's windows"),
                                     ("_low", "Lower end of its anytime-valid interval"),
                                     ("_high", "Upper end of its anytime-valid interval"),
                                     ("_threshold", "The watch policy's threshold"),
                                     ("_last_window", "The last window's own value"),
                                     ("_decision", "1 decided good, -1 bad, 0 undecided"))}
        for f in figures:
            c = f.check
            values = {"": c.value, "_low": c.ci_low, "_high": c.ci_high,
                      "_threshold": c.threshold, "_last_window": f.last,
                      "_decision": float(DECISIONS.get(c.status, 0))}
            for suffix, value in values.items():
                if value is not None:
                    fams[suffix].add_metric((c.name,), float(value))
        yield from fams.values()
