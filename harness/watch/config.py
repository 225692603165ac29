"""The whole configuration of a watch, one object passed down (and the owner of every
default the CLI shows). Kept free of heavy imports: `layergate --help` reads it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WatchConfig:
    prometheus: str
    baseline: str  # label matchers selecting the baseline's series
    candidate: str
    policy: Path | None = None  # default: scenarios/watch/no-regression.yaml
    engine: str = "layergate"
    metric_names: Path | None = None  # default: scenarios/watch/metric-names.yaml
    stages: tuple[float, ...] = (1, 5, 25, 50, 100)
    window_s: float = 60.0
    min_windows: int = 5
    max_windows: int = 30
    no_data_windows: int = 3
    min_requests: int = 1
    lag_s: float = 2.0
    on_advance: str | None = None
    on_rollback: str | None = None
    hook_timeout_s: float = 300.0
    serve_port: int | None = None
    host: str = "127.0.0.1"
