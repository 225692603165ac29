"""The replay work queue, kept in the run's SQLite file beside `results`.

The parent fills `replay_queue` with what is still to send (one row per traffic record,
listing the arms it still needs, with its intended offset). Every Locust user in every
worker process claims the next row atomically (one UPDATE ... RETURNING inside an
IMMEDIATE transaction), so `--processes N` splits the traffic without duplicates and with
no master-to-worker plumbing. The first claim fixes `t0`, the wall-clock start that all
processes share: a record is due at `t0 + offset_s`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS replay_queue (seq INTEGER PRIMARY KEY, request_id TEXT NOT NULL,"
    " arms TEXT NOT NULL, offset_s REAL NOT NULL, claimed_by TEXT, claimed_at REAL,"
    " done INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS replay_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)


@dataclass(frozen=True)
class WorkItem:
    seq: int
    request_id: str
    arms: tuple[str, ...]
    offset_s: float
    t0: float  # wall-clock time (time.time()) of offset 0, shared by all processes


def ensure_schema(conn: sqlite3.Connection) -> None:
    for statement in SCHEMA:
        conn.execute(statement)


def fill(conn: sqlite3.Connection, items: Iterable[tuple[str, tuple[str, ...], float]]) -> int:
    """Replace the queue with `items` (request_id, arms, offset_s) in send order."""
    ensure_schema(conn)
    rows = [(rid, json.dumps(list(arms)), offset) for rid, arms, offset in items]
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("DELETE FROM replay_queue")
        conn.execute("DELETE FROM replay_meta WHERE key = 't0'")
        conn.executemany("INSERT INTO replay_queue (request_id, arms, offset_s) VALUES (?, ?, ?)",
                         rows)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return len(rows)


def claim(conn: sqlite3.Connection, worker: str) -> WorkItem | None:
    """Take the next unclaimed item, or None when everything is claimed."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        now = time.time()
        conn.execute("INSERT OR IGNORE INTO replay_meta (key, value) VALUES ('t0', ?)", (now,))
        t0 = float(conn.execute("SELECT value FROM replay_meta WHERE key = 't0'").fetchone()[0])
        row = conn.execute(
            "UPDATE replay_queue SET claimed_by = ?, claimed_at = ? WHERE seq = ("
            "SELECT seq FROM replay_queue WHERE claimed_by IS NULL ORDER BY seq LIMIT 1) "
            "RETURNING seq, request_id, arms, offset_s", (worker, now)).fetchone()
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    if row is None:
        return None
    return WorkItem(row[0], row[1], tuple(json.loads(row[2])), row[3], t0)


def mark_done(conn: sqlite3.Connection, seq: int) -> None:
    conn.execute("UPDATE replay_queue SET done = 1 WHERE seq = ?", (seq,))


def progress(conn: sqlite3.Connection) -> tuple[int, int]:
    """(items done, items in the queue)."""
    done, total = conn.execute(
        "SELECT COALESCE(SUM(done), 0), COUNT(*) FROM replay_queue").fetchone()
    return int(done), int(total)
