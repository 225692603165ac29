"""Shadow replay through Locust: every traffic record goes to every arm at the same intended
time, streaming; results land in the run's SQLite store (see `runner`, `locustfile`)."""

from harness.replay.config import ConfigError, ReplayConfig
from harness.replay.runner import ReplayError, run_replay

__all__ = ["ConfigError", "ReplayConfig", "ReplayError", "run_replay"]
