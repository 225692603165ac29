"""Shadow replay through Locust: every traffic record goes to every arm at the same intended
time, streaming; Locust's master writes the results into the run's SQLite store for all its
workers (see `runner`, `master`, `channel`, `locustfile`).

The names below load their module on first use, so a Locust process importing one of this
package's modules (`locustfile` and what it needs) does not import the runner's."""

import importlib
from typing import Any

_HOMES = {"ConfigError": "config", "ReplayConfig": "config", "ReplayError": "errors",
          "StopHook": "runner", "run_replay": "runner"}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
