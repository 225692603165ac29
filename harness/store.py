"""The results store of a run: `results.sqlite`, one row per (request_id, arm, repeat,
concurrency) holding every field of `exporters.records.ArmResult` (lists and objects as JSON).

Why SQLite and how it stays consistent:
- WAL journal mode: one writer at a time, readers never block it, and a crash (kill -9,
  Ctrl-C, power loss after the commit) leaves the last committed row intact.
- Every process writes directly: each Locust worker (`--processes N`) opens its own
  connection; `busy_timeout` makes a writer wait for the lock instead of failing.
- One row is one autocommitted INSERT, written as the response completes, so the store
  never holds half a result; a repeated (request, arm) replaces the earlier row (that is how
  `--resume` turns an error into a result).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from exporters.records import ArmResult

BUSY_TIMEOUT_MS = 30_000
_JSON_FIELDS = {"itl_s", "token_ids", "logprobs", "top_logprobs", "extension"}
_COLUMNS = [f.name for f in fields(ArmResult)]
_TYPES = {"ok": "INTEGER NOT NULL", "http_status": "INTEGER", "ttft_s": "REAL", "e2e_s": "REAL",
          "output_tokens": "INTEGER", "prompt_tokens": "INTEGER", "max_tokens": "INTEGER",
          "repeat": "INTEGER NOT NULL", "concurrency": "INTEGER NOT NULL"}
# extra columns beyond ArmResult: when it was meant to be sent, written, and by which process
_EXTRA = {"intended_at": "REAL", "recorded_at": "REAL NOT NULL", "worker": "TEXT"}


def _schema() -> str:
    cols = [f'"{name}" {_TYPES.get(name, "TEXT")}' for name in _COLUMNS]
    cols += [f'"{name}" {kind}' for name, kind in _EXTRA.items()]
    return (f"CREATE TABLE IF NOT EXISTS results ({', '.join(cols)}, "
            "PRIMARY KEY (request_id, arm, repeat, concurrency))")


def connect(path: str | Path) -> sqlite3.Connection:
    """A WAL-mode autocommit connection with a generous busy timeout."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # durable at each WAL checkpoint; safe on crash
    return conn


def _encode(result: ArmResult) -> list[Any]:
    row = []
    for name in _COLUMNS:
        value = getattr(result, name)
        if name in _JSON_FIELDS:
            value = None if value is None else json.dumps(value, ensure_ascii=False)
        elif name == "ok":
            value = int(value)
        row.append(value)
    return row


def _decode(row: sqlite3.Row) -> ArmResult:
    values: dict[str, Any] = {}
    for name in _COLUMNS:
        value = row[name]
        if name in _JSON_FIELDS and value is not None:
            value = json.loads(value)
            value = (value or {}) if name == "extension" else tuple(value)
        elif name == "ok":
            value = bool(value)
        values[name] = value
    values["itl_s"] = values["itl_s"] or ()
    values["extension"] = values["extension"] or {}
    return ArmResult(**values)


class StoreError(RuntimeError):
    pass


class ResultStore:
    """Read and write a run's `results.sqlite`. One instance per process."""

    def __init__(self, path: str | Path, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StoreError(f"{self.path}: no results store")
        try:
            self.conn = connect(self.path)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute(_schema())
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a readable results store: {exc}") from exc

    def put(self, result: ArmResult, intended_at: float | None = None) -> None:
        names = _COLUMNS + list(_EXTRA)
        row = _encode(result) + [intended_at, time.time(), f"{os.uname().nodename}:{os.getpid()}"]
        marks = ", ".join("?" * len(names))
        quoted = ", ".join(f'"{n}"' for n in names)
        self.conn.execute(f"INSERT OR REPLACE INTO results ({quoted}) VALUES ({marks})", row)

    def results(self) -> list[ArmResult]:
        rows = self.conn.execute("SELECT * FROM results ORDER BY rowid").fetchall()
        return [_decode(r) for r in rows]

    def rows_after(self, rowid: int) -> list[tuple[int, ArmResult]]:
        """Rows written after `rowid` (a replaced row gets a new rowid), for live tailing."""
        rows = self.conn.execute("SELECT rowid AS _rowid, * FROM results WHERE rowid > ? "
                                 "ORDER BY rowid", (rowid,)).fetchall()
        return [(r["_rowid"], _decode(r)) for r in rows]

    def count(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def ok_pairs(self) -> set[tuple[str, str]]:
        rows = self.conn.execute("SELECT request_id, arm FROM results WHERE ok = 1")
        return {(r[0], r[1]) for r in rows}

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
