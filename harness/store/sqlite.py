"""The one SQLite connection recipe of the store, and its write transaction.

WAL journal mode: one writer at a time, readers never block it, and a crash (kill -9,
Ctrl-C, power loss after the commit) leaves the last committed transaction intact.
Several processes may write (each Locust worker opens its own connection); `busy_timeout`
makes a writer wait for the lock instead of failing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_MS = 30_000
CHUNK = 50_000  # rows a bulk read converts at once: bounds the Python objects alive to a few MB


def connect(path: str | Path) -> sqlite3.Connection:
    """A WAL-mode autocommit connection with a generous busy timeout; rows by name."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # durable at each WAL checkpoint; safe on crash
    return conn


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE (take the write lock first, so two writers never both read then
    write), COMMIT on success, ROLLBACK on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
