"""The results of a run: table `results` of `results.sqlite`, read and written through
`ResultStore`, which also owns the run's work queue (`store.queue`, see `queue.py`).

One row is written in one transaction as the response completes, so the store never holds
half a result; a repeated (request, arm, repeat, concurrency) replaces the earlier row (that
is how `--resume` turns an error into a result).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from layergate.exporters.errors import InfrastructureError
from layergate.exporters.figures.answer_tally import Tally
from layergate.exporters.figures.columns import ResultColumns
from layergate.exporters.records import ArmResult
from layergate.harness.store.column_read import REPLAY
from layergate.harness.store.queue import WorkQueue
from layergate.harness.store.rows import (
    add_missing_columns,
    decode,
    encode_row,
    insert_rows,
    schema,
)
from layergate.harness.store.scan import Scan, read_scan
from layergate.harness.store.sqlite import connect, write_transaction
from layergate.harness.store.tallies import tallies


class StoreError(InfrastructureError, RuntimeError):
    """A results store that is missing or cannot be read."""


@dataclass(frozen=True)
class StoredResult:
    """A row as stored: the result and the columns around it."""

    result: ArmResult
    intended_at: float | None  # wall clock (time.time()) it was meant to be sent
    recorded_at: float  # wall clock it was written
    worker: str | None  # who sent it ("host:pid", or a worker's name)


class Head(NamedTuple):
    """What a row says of how its request went, without the answer: what the replay's
    circuit breaker reads as a run is written."""

    arm: str
    ok: bool
    http_status: int | None
    error: str | None

    @classmethod
    def of(cls, result: ArmResult) -> Head:
        return cls(result.arm, result.ok, result.http_status, result.error)


class ResultStore:
    """Read and write a run's `results.sqlite`, and own its work queue (`self.queue`).
    One instance per process; `create=False` opens an existing store read-only in effect
    (it creates no table, so an old run directory loads unchanged)."""

    def __init__(self, path: str | Path, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StoreError(f"{self.path}: no results store")
        try:
            self.conn = connect(self.path)
            if create:
                for table in schema():
                    self.conn.execute(table)
                add_missing_columns(self.conn)
                WorkQueue.create_schema(self.conn)
            self.conn.execute("SELECT 1 FROM results LIMIT 1")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a readable results store: {exc}") from exc
        self.queue = WorkQueue(self.conn)
        self.rows_read = 0  # results decoded by this instance (a tail reads only new ones)

    def put(self, result: ArmResult, intended_at: float | None = None,
            worker: str | None = None) -> None:
        insert_rows(self.conn, [encode_row(result, intended_at, worker)])

    def put_many(self, results: Iterable[ArmResult], worker: str | None = None) -> int:
        """Write `results` in one transaction; returns how many."""
        rows = [encode_row(r, None, worker) for r in results]
        with write_transaction(self.conn) as conn:
            insert_rows(conn, rows)
        return len(rows)

    def results(self) -> list[ArmResult]:
        rows = self.conn.execute("SELECT * FROM results ORDER BY rowid").fetchall()
        self.rows_read += len(rows)
        return [decode(r) for r in rows]

    def columns(self) -> ResultColumns:
        """The shadow replay's rows (those of no repeat suite) as columns, in write order."""
        return self.scan().replay

    def scan(self) -> Scan:
        """The replay's columns, the repeat suite's rows, the tallies and the send lags, in
        one pass over the store."""
        return read_scan(self.path)

    def results_at(self, rowids: Iterable[int]) -> list[ArmResult]:
        """The rows `rowids`, in write order."""
        rows = self.conn.execute("SELECT * FROM results WHERE rowid IN (SELECT value FROM "
                                 "json_each(?)) ORDER BY rowid",
                                 (json.dumps([int(r) for r in rowids]),)).fetchall()
        return [decode(r) for r in rows]

    def repeated(self) -> list[ArmResult]:
        """The rows of prompts sent more than once (a repeat suite in the run itself)."""
        rows = self.conn.execute(f"SELECT * FROM results WHERE NOT ({REPLAY}) "
                                 "ORDER BY rowid").fetchall()
        return [decode(r) for r in rows]

    def rows(self) -> list[StoredResult]:
        """Every row with when it was meant to be sent, written, and by whom."""
        rows = self.conn.execute("SELECT * FROM results ORDER BY rowid").fetchall()
        return [StoredResult(decode(r), r["intended_at"], r["recorded_at"], r["worker"])
                for r in rows]

    def rows_after(self, rowid: int) -> list[tuple[int, ArmResult]]:
        """Rows written after `rowid` (a replaced row gets a new rowid), for live tailing."""
        rows = self.conn.execute("SELECT rowid AS _rowid, * FROM results WHERE rowid > ? "
                                 "ORDER BY rowid", (rowid,)).fetchall()
        self.rows_read += len(rows)
        return [(r["_rowid"], decode(r)) for r in rows]

    def heads_after(self, rowid: int) -> list[tuple[int, Head]]:
        """`rows_after`, only each row's `Head`."""
        rows = self.conn.execute("SELECT rowid, arm, ok, http_status, error FROM results "
                                 "WHERE rowid > ? ORDER BY rowid", (rowid,)).fetchall()
        self.rows_read += len(rows)
        return [(r[0], Head(r[1], bool(r[2]), r[3], r[4])) for r in rows]

    def send_lags(self) -> list[float]:
        """Every row's send lag (`ArmResult.send_lag_s`), where recorded."""
        try:
            rows = self.conn.execute("SELECT send_lag_s FROM results "
                                     "WHERE send_lag_s IS NOT NULL").fetchall()
        except sqlite3.OperationalError:  # a store older than the column, opened read-only
            return []
        return [r[0] for r in rows]

    def last_rowid(self) -> int:
        """The newest row's rowid (0 when empty): where a tail of new rows only starts."""
        return self.conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM results").fetchone()[0]

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def pairs(self, ok_only: bool = False) -> set[tuple[str, str]]:
        """(request_id, arm) with a row; with `ok_only`, with an ok row."""
        where = " WHERE ok = 1" if ok_only else ""
        rows = self.conn.execute(f"SELECT request_id, arm FROM results{where}")
        return {(r[0], r[1]) for r in rows}

    def tallies(self) -> list[Tally]:
        """Answers counted by arm, scenario, ok, token source and quirks (every row)."""
        return tallies(self.conn)

    def counts_by_arm(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for arm, ok, n in self.conn.execute(
                "SELECT arm, ok, COUNT(*) FROM results GROUP BY arm, ok"):
            counts.setdefault(arm, {"ok": 0, "error": 0})["ok" if ok else "error"] = n
        return counts

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
