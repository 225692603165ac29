"""A real Prometheus (the Debian package's binary) on 127.0.0.1, asked through the shared
client (harness/prometheus_api.py)."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from layergate.harness.processes import ManagedProcess, free_port
from layergate.harness.prometheus_api import PrometheusAPI
from layergate.harness.stack.health import StackError, wait_healthy
from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus_config import ScrapeTargets, write_prometheus_config


@dataclass(frozen=True)
class PrometheusServer:
    url: str
    process: ManagedProcess
    config_path: Path

    def graph_link(self, expr: str, range_: str = "15m") -> str:
        return (f"{self.url}/graph?g0.expr={quote(expr)}&g0.tab=0&g0.range_input={range_}")

    def api(self) -> PrometheusAPI:
        """A client of its own for each call (close it), as `httpx.get` makes one: the
        server is a frozen record and holds no connection."""
        return PrometheusAPI(self.url, timeout=30)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        with self.api() as api:
            return api.query(expr, at)

    def query_range(self, expr: str, start: float, end: float,
                    step: float = 1.0) -> list[dict[str, Any]]:
        with self.api() as api:
            return api.query_range(expr, start, end, step)

    def label_values(self, label: str, match: str) -> list[str]:
        with self.api() as api:
            return api.get(f"/api/v1/label/{label}/values", {"match[]": match})

    def targets(self) -> list[dict[str, Any]]:
        with self.api() as api:
            return api.get("/api/v1/targets", {})["activeTargets"]

    def rule_groups(self) -> list[dict[str, Any]]:
        with self.api() as api:
            return api.get("/api/v1/rules", {})["groups"]

    def wait_for(self, expr: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll until `expr` returns at least one series (e.g. after a first scrape)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.5)


def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        raise StackError("prometheus is not installed: `make install` installs the Debian "
                         "package (or: apt-get install prometheus)")
    return path


def start_prometheus(processes: ProcessSet, targets: ScrapeTargets, workdir: Path,
                     timeout: float = 60.0) -> PrometheusServer:
    """Write the generated config under `workdir` and start Prometheus on a free port."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_prometheus_config(targets, workdir / "prometheus.yml")
    port = free_port()
    cmd = [prometheus_binary(), f"--config.file={config}",
           f"--storage.tsdb.path={workdir / 'data'}",
           f"--web.listen-address=127.0.0.1:{port}",
           "--storage.tsdb.retention.time=1d", "--log.level=warn"]
    proc = processes.start("prometheus", cmd)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, f"{url}/-/ready", timeout)
    return PrometheusServer(url, proc, config)
