"""The native stack: real engines, a real Prometheus and the harness's metric endpoints as
subprocesses on 127.0.0.1, for machines without Docker (`layergate demo`, the tests).

Everything started here is tracked by a `ProcessSet` and stopped on exit, on Ctrl-C and on
SIGTERM, process group by process group.
"""

from layergate.harness.processes import ManagedProcess
from layergate.harness.stack.engines import EngineSpec
from layergate.harness.stack.native import NativeStack, StackConfig
from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus import PrometheusServer
from layergate.harness.stack.prometheus_config import ScrapeTargets, render_prometheus_config

__all__ = [
    "EngineSpec",
    "ManagedProcess",
    "NativeStack",
    "ProcessSet",
    "PrometheusServer",
    "ScrapeTargets",
    "StackConfig",
    "render_prometheus_config",
]
