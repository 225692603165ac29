"""The store of a run, `results.sqlite`: its results (`ResultStore`) and the work queue the
store owns (`ResultStore.queue`). SQLite in WAL mode, safe for several writer processes and
for a crash at any point (see `sqlite.py`). No SQL about a run lives outside this package.

The names below load their module on first use: a Locust worker takes the work items
(`items.py`) and never opens a store, and pays nothing for SQLite or the readers."""

from layergate.exporters.lazy import lazy_names

_HOMES = {"ArmState": "items", "Completion": "items", "QueueEntry": "items",
          "QueueProgress": "items", "TurnDone": "items", "WorkItem": "items",
          "WorkQueue": "queue", "ResultStore": "results", "StoredResult": "results",
          "StoreError": "results", "this_process": "rows"}

__all__ = sorted(_HOMES)

__getattr__ = lazy_names(__name__, _HOMES)
