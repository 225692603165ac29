"""The A/B dashboard's Accuracy row against a real Prometheus scraping a run's figures
(`metrics --serve`, here a run of which 10 % of the items the candidate gets wrong): every
query of the row runs and shows data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.metrics_server import serve_metrics
from layergate.exporters.prometheus_export import register_run
from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus import start_prometheus
from layergate.harness.stack.prometheus_config import ScrapeTargets
from tests.test_accuracy import CFG, _correct, _refs, _results

pytestmark = [pytest.mark.prometheus]

BOARD = Path(__file__).resolve().parents[1] / "dashboards" / "grafana" / "ab-overview.json"


def _accuracy_row(board: dict) -> list[dict]:
    panels, inside = [], False
    for panel in board["panels"]:
        if panel["type"] == "row":
            inside = panel["title"].startswith("Accuracy")
            continue
        if inside:
            panels.append(panel)
    return panels


def test_the_accuracy_row_shows_a_run(tmp_path: Path, prometheus_bin: str) -> None:
    figures = compute_figures(_results(_correct(60, seed=4, lost=0.1)), config=CFG,
                              references=_refs(60))
    registry = CollectorRegistry()
    register_run(registry, "acc", figures)
    server = serve_metrics(registry, "127.0.0.1", 0)
    panels = _accuracy_row(json.loads(BOARD.read_text()))
    assert [p["title"] for p in panels] == ["Accuracy against references",
                                            "Accuracy delta vs baseline (paired)",
                                            "Flips: right to wrong / wrong to right"]
    processes = ProcessSet(tmp_path / "logs")
    try:
        prom = start_prometheus(processes, ScrapeTargets(
            engines={}, exporter=[f"127.0.0.1:{server.port}"]), tmp_path / "prom")
        assert prom.wait_for("layergate_run_accuracy", timeout=30)
        for panel in panels:
            for target in panel["targets"]:
                expr = re.sub(r"\$\{?(arm|run|scenario)\}?", ".*", target["expr"])
                assert prom.wait_for(expr, timeout=10), f"{panel['title']}: {expr}"
    finally:
        processes.close()
        server.stop()
