"""A dashboard row's panels, and every query of them run on a real Prometheus scraping an
exporter: the check the dashboard tests share (no Grafana server can run here)."""

from __future__ import annotations

import re
from pathlib import Path

from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus import start_prometheus
from layergate.harness.stack.prometheus_config import ScrapeTargets

BOARD = Path(__file__).resolve().parents[2] / "dashboards" / "grafana" / "ab-overview.json"
VARIABLES = re.compile(r"\$\{?(arm|run|scenario)\}?")


def row_panels(board: dict, title: str) -> list[dict]:
    """The panels below the row whose title starts with `title`, up to the next row."""
    panels, inside = [], False
    for panel in board["panels"]:
        if panel["type"] == "row":
            inside = panel["title"].startswith(title)
            continue
        if inside:
            panels.append(panel)
    return panels


def assert_queries_answer(panels: list[dict], port: int, first: str, work: Path) -> None:
    """A Prometheus scraping 127.0.0.1:`port` returns data for `first` and then for every
    target of `panels` (dashboard variables matching anything)."""
    processes = ProcessSet(work / "logs")
    try:
        prom = start_prometheus(processes, ScrapeTargets(
            engines={}, exporter=[f"127.0.0.1:{port}"]), work / "prom")
        assert prom.wait_for(first, timeout=30)
        for panel in panels:
            for target in panel["targets"]:
                expr = VARIABLES.sub(".*", target["expr"])
                assert prom.wait_for(expr, timeout=10), f"{panel['title']}: {expr}"
    finally:
        processes.close()
