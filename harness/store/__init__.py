"""The store of a run, `results.sqlite`: its results (`ResultStore`) and the work queue the
store owns (`ResultStore.queue`). SQLite in WAL mode, safe for several writer processes and
for a crash at any point (see `sqlite.py`). No SQL about a run lives outside this package."""

from layergate.harness.store.queue import (
    ArmState,
    Completion,
    QueueEntry,
    QueueProgress,
    TurnDone,
    WorkItem,
    WorkQueue,
)
from layergate.harness.store.results import ResultStore, StoredResult, StoreError
from layergate.harness.store.rows import this_process

__all__ = ["ArmState", "Completion", "QueueEntry", "QueueProgress", "ResultStore", "StoreError",
           "StoredResult", "TurnDone", "WorkItem", "WorkQueue", "this_process"]
