"""The A/B dashboard's Capacity row against a real Prometheus scraping a sweep's metrics
(`capacity --metrics-port`, here fed a stored sweep): every query of the row runs and shows
data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from layergate.harness.capacity.live import SweepMetrics
from layergate.harness.capacity.report import sweep_figures
from layergate.harness.processes import free_port
from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus import start_prometheus
from layergate.harness.stack.prometheus_config import ScrapeTargets
from layergate.harness.sweepdir import SweepDir
from tests.test_capacity import _config, _sweep_dir

pytestmark = [pytest.mark.prometheus]

BOARD = Path(__file__).resolve().parents[1] / "dashboards" / "grafana" / "ab-overview.json"


def _capacity_row(board: dict) -> list[dict]:
    panels, inside = [], False
    for panel in board["panels"]:
        if panel["type"] == "row":
            inside = panel["title"].startswith("Capacity")
            continue
        if inside:
            panels.append(panel)
    return panels


def test_the_capacity_row_shows_a_sweep(tmp_path: Path, prometheus_bin: str) -> None:
    out = _sweep_dir(tmp_path, "complete")
    state = SweepDir(out).read()
    port = free_port()
    live = SweepMetrics(port, "127.0.0.1", "sweep", 0.95, 0.01)
    live.update(state.steps, sweep_figures(state, _config(out=out)))
    panels = _capacity_row(json.loads(BOARD.read_text()))
    assert len(panels) == 5
    processes = ProcessSet(tmp_path / "logs")
    try:
        prom = start_prometheus(processes, ScrapeTargets(engines={},
                                                         exporter=[f"127.0.0.1:{port}"]),
                                tmp_path / "prom")
        assert prom.wait_for("layergate_capacity_step_load", timeout=30)
        for panel in panels:
            for target in panel["targets"]:
                expr = re.sub(r"\$\{?(arm|run)\}?", ".*", target["expr"])
                assert prom.wait_for(expr, timeout=10), f"{panel['title']}: {expr}"
    finally:
        processes.close()
        live.close()
