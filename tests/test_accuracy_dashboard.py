"""The A/B dashboard's Accuracy row against a real Prometheus scraping a run's figures
(`metrics --serve`, here a run of which 10 % of the items the candidate gets wrong): every
query of the row runs and shows data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.metrics_server import serve_metrics
from layergate.exporters.prometheus_export import register_run
from tests.support.dashboard_rows import BOARD, assert_queries_answer, row_panels
from tests.test_accuracy import CFG, _correct, _refs, _results

pytestmark = [pytest.mark.prometheus]


def test_the_accuracy_row_shows_a_run(tmp_path: Path, prometheus_bin: str) -> None:
    figures = compute_figures(_results(_correct(60, seed=4, lost=0.1)), config=CFG,
                              references=_refs(60))
    registry = CollectorRegistry()
    register_run(registry, "acc", figures)
    server = serve_metrics(registry, "127.0.0.1", 0)
    panels = row_panels(json.loads(BOARD.read_text()), "Accuracy")
    assert [p["title"] for p in panels] == ["Accuracy against references",
                                            "Accuracy delta vs baseline (paired)",
                                            "Flips: right to wrong / wrong to right"]
    try:
        assert_queries_answer(panels, server.port, "layergate_run_accuracy", tmp_path)
    finally:
        server.stop()
