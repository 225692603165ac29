"""How an `ArmResult` is laid out in table `results`: one column per field (lists and
objects as JSON), plus when it was meant to be sent, when it was written, and by whom.
Primary key (request_id, arm, repeat, concurrency)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from dataclasses import fields
from typing import Any, NamedTuple

from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import from_json, to_json
from layergate.harness.store.summary import (
    INSERT_NAMES,
    NAMES_SCHEMA,
    gaps,
    names,
    parts,
    summary,
)

_JSON_FIELDS = {"itl_s", "token_ids", "logprobs", "top_logprobs", "extension",
                "quirks", "reported", "tool_calls", "schema_valid"}
_OBJECT_FIELDS = ("extension", "reported", "schema_valid")  # JSON objects, {} when absent
_COLUMNS = [f.name for f in fields(ArmResult)]
_TYPES = {"ok": "INTEGER NOT NULL", "http_status": "INTEGER", "ttft_s": "REAL", "e2e_s": "REAL",
          "output_tokens": "INTEGER", "prompt_tokens": "INTEGER", "max_tokens": "INTEGER",
          "repeat": "INTEGER NOT NULL", "concurrency": "INTEGER NOT NULL", "send_lag_s": "REAL",
          "reasoning_tokens": "INTEGER", "answer_ttft_s": "REAL"}
# extra columns beyond ArmResult: when it was meant to be sent, written, and by which
# process; the row's numbers and its gaps in binary, for bulk reads (summary.py)
_EXTRA = {"intended_at": "REAL", "recorded_at": "REAL NOT NULL", "worker": "TEXT",
          "summary": "BLOB", "itl_f64": "BLOB", "parts": "BLOB"}
_NAMES = [*_COLUMNS, *_EXTRA]
_QUOTED = ", ".join(f'"{name}"' for name in _NAMES)
# json.dumps(value, ensure_ascii=False) builds this encoder anew on every call
_TO_JSON = json.JSONEncoder(ensure_ascii=False).encode
_JSON_AT = [(i, name) for i, name in enumerate(_COLUMNS) if name in _JSON_FIELDS]
_OK_AT = _COLUMNS.index("ok")
_EMPTY = {tuple: "[]", list: "[]", dict: "{}"}
_INSERT = (f"INSERT OR REPLACE INTO results ({_QUOTED}) "
           f"VALUES ({', '.join('?' * len(_NAMES))})")


def _column(name: str) -> str:
    return f'"{name}" {_TYPES.get(name, "TEXT")}'


def schema() -> list[str]:
    """The store's tables: `results`, and the names its rows' summaries refer to."""
    cols = [_column(name) for name in _COLUMNS]
    cols += [f'"{name}" {kind}' for name, kind in _EXTRA.items()]
    return [f"CREATE TABLE IF NOT EXISTS results ({', '.join(cols)}, "
            "PRIMARY KEY (request_id, arm, repeat, concurrency))", NAMES_SCHEMA]


def present_columns(conn: sqlite3.Connection) -> set[str]:
    """The columns table `results` has (a store of an earlier version lacks some)."""
    return {row[1] for row in conn.execute("PRAGMA table_info(results)")}


def add_missing_columns(conn: sqlite3.Connection) -> None:
    """Columns `ArmResult` gained after the store was written (a resume of an older run):
    added empty, read back as the field's default."""
    have = present_columns(conn)
    added = [_column(name) for name in _COLUMNS if name not in have]
    added += [f'"{name}" BLOB' for name in ("summary", "itl_f64", "parts")
              if name not in have]
    for column in added:
        with contextlib.suppress(sqlite3.OperationalError):  # another process added it
            conn.execute(f"ALTER TABLE results ADD COLUMN {column}")


def this_process() -> str:
    """The default writer name: host and process id."""
    return f"{os.uname().nodename}:{os.getpid()}"


class Encoded(NamedTuple):
    """A row's values and the names its summary refers to (`summary.names`)."""

    values: list[Any]
    names: list[tuple[int, str]]


def encode_row(result: ArmResult, intended_at: float | None, worker: str | None) -> Encoded:
    """The row's values, computed before a transaction so the write lock is held briefly."""
    named = names(result)
    return Encoded([*_encode(result), intended_at, time.time(), worker or this_process(),
                    summary(result, named), gaps(result), parts(result)], named)


def _encode(result: ArmResult) -> list[Any]:
    row = [getattr(result, name) for name in _COLUMNS]
    for i, name in _JSON_AT:
        value = row[i]
        if name == "tool_calls":
            row[i] = _TO_JSON(to_json(value)) if value else None
        elif value is not None:
            # most rows hold no quirks, no extension: their JSON text, unencoded
            row[i] = (not value and _EMPTY.get(type(value))) or _TO_JSON(value)
    row[_OK_AT] = int(row[_OK_AT])
    return row


def decode(row: sqlite3.Row) -> ArmResult:
    values: dict[str, Any] = {}
    present = row.keys()
    for name in _COLUMNS:
        if name not in present:  # a store older than the field: its default
            continue
        value = row[name]
        if name in _JSON_FIELDS and value is not None:
            value = json.loads(value)
            value = ((value or {}) if name in _OBJECT_FIELDS else
                     from_json(value) if name == "tool_calls" else tuple(value))
        elif name == "ok":
            value = bool(value)
        values[name] = value
    values["itl_s"] = values["itl_s"] or ()
    for name in _OBJECT_FIELDS:
        values[name] = values.get(name) or {}
    values["quirks"] = values.get("quirks") or ()
    values["tool_calls"] = values.get("tool_calls") or ()
    values["reasoning_text"] = values.get("reasoning_text") or ""
    return ArmResult(**values)


def insert_rows(conn: sqlite3.Connection, rows: list[Encoded]) -> None:
    """Write encoded rows (a repeated key replaces the old row), their names first: a row
    never refers to a name that is not there."""
    conn.executemany(INSERT_NAMES, [n for row in rows for n in row.names])
    conn.executemany(_INSERT, [row.values for row in rows])
