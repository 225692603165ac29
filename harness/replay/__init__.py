"""Shadow replay through Locust: every traffic record goes to every arm at the same intended
time, streaming; Locust's master writes the results into the run's SQLite store for all its
workers (see `runner`, `master`, `channel`, `locustfile`).

The names below load their module on first use, so a Locust process importing one of this
package's modules (`locustfile` and what it needs) does not import the runner's."""

from layergate.exporters.lazy import lazy_names

_HOMES = {"ConfigError": "config", "ReplayConfig": "config", "ReplayError": "errors",
          "StopHook": "runner", "run_replay": "runner"}

__all__ = sorted(_HOMES)

__getattr__ = lazy_names(__name__, _HOMES)
