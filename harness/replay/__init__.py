"""Shadow replay through Locust: every traffic record goes to every arm at the same intended
time, streaming; Locust's master writes the results into the run's SQLite store for all its
workers (see `runner`, `master`, `channel`, `locustfile`)."""

from layergate.harness.replay.config import ConfigError, ReplayConfig
from layergate.harness.replay.errors import ReplayError
from layergate.harness.replay.runner import StopHook, run_replay

__all__ = ["ConfigError", "ReplayConfig", "ReplayError", "StopHook", "run_replay"]
