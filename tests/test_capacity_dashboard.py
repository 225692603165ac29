"""The A/B dashboard's Capacity row against a real Prometheus scraping a sweep's metrics
(`capacity --metrics-port`, here fed a stored sweep): every query of the row runs and shows
data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layergate.harness.capacity.live import SweepMetrics
from layergate.harness.capacity.report import sweep_figures
from layergate.harness.processes import free_port
from layergate.harness.sweepdir import SweepDir
from tests.support.dashboard_rows import BOARD, assert_queries_answer, row_panels
from tests.test_capacity import _config, _sweep_dir

pytestmark = [pytest.mark.prometheus]


def test_the_capacity_row_shows_a_sweep(tmp_path: Path, prometheus_bin: str) -> None:
    out = _sweep_dir(tmp_path, "complete")
    state = SweepDir(out).read()
    port = free_port()
    live = SweepMetrics(port, "127.0.0.1", "sweep", 0.95, 0.01)
    live.update(state.steps, sweep_figures(state, _config(out=out)))
    panels = row_panels(json.loads(BOARD.read_text()), "Capacity")
    assert len(panels) == 5
    try:
        assert_queries_answer(panels, port, "layergate_capacity_step_load", tmp_path)
    finally:
        live.close()
