"""Table `results` read from its rows' binary summaries (`summary.py`): each LAYOUT field
as one array, a chunk of rows at a time, with one `numpy.frombuffer` per chunk, and the
rows' names from table `result_names`. A store that cannot be read so (a row written by an
earlier version, without a summary or in an earlier layout) reads as None: the caller reads
it from its columns instead (`column_read.py`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import numpy as np

from layergate.exporters.figures.columns import Factorised
from layergate.harness.store.sqlite import CHUNK
from layergate.harness.store.summary import LAYOUT

_FLAGS = ("ok", "length_stop", "tokens_counted", "has_extension", "has_top_logprobs", "has_ids")


class _Unreadable(Exception):
    """A chunk the bulk read cannot take: read the store from its columns instead."""


# a chunk of rows as four values: SQLite concatenates their summaries and gaps (blobs as
# text, byte for byte: what group_concat does with a blob in a UTF-8 database; the lengths
# are checked all the same), so Python never makes a value per row
_CHUNK_SQL = ("SELECT count(*), count(s), count(g), max(r), group_concat(r), "
              "group_concat(s, ''), group_concat(length(g)), group_concat(g, '') FROM "
              "(SELECT rowid AS r, summary AS s, itl_f64 AS g FROM results WHERE rowid > ? "
              "ORDER BY rowid LIMIT ?)")


def _binary_chunks(conn: sqlite3.Connection) -> Iterator[tuple[np.ndarray, np.ndarray,
                                                               np.ndarray, np.ndarray]]:
    """(rowids, summaries as LAYOUT, gaps, gaps per row) of CHUNK rows at a time, in rowid
    order; _Unreadable for a row without them or in an earlier layout."""
    cur = conn.cursor()
    cur.row_factory = None
    last = 0
    while True:
        n, n_summary, n_gaps, top, rowids, summaries, lengths, gaps = cur.execute(
            _CHUNK_SQL, (last, CHUNK)).fetchone()
        if not n:
            return
        if n_summary != n or n_gaps != n or len(summaries) != n * LAYOUT.itemsize:
            raise _Unreadable  # written before the binary summary, or in an earlier layout
        per_row = _ints(lengths, n) // 8
        if int(per_row.sum()) * 8 != len(gaps or b""):
            raise _Unreadable
        yield (_ints(rowids, n), np.frombuffer(summaries, dtype=LAYOUT),
               np.frombuffer(gaps or b"", dtype="<f8"), per_row)
        last = top


def _ints(text: bytes, n: int) -> np.ndarray:
    """n comma-separated integers (group_concat's), parsed in bulk."""
    out = np.array(text.split(b","), dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
    if out.size != n:
        raise _Unreadable
    return out


def read_summaries(conn: sqlite3.Connection
                   ) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
    """Every row's LAYOUT fields and gaps, from one snapshot: rows a replay writes meanwhile
    are not half in. None when the store has no names table or a row cannot be read so."""
    if "result_names" not in {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}:
        return None
    conn.execute("BEGIN")
    try:
        return _read_binary(conn)
    finally:
        conn.execute("COMMIT")


def _read_binary(conn: sqlite3.Connection) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
    """Each LAYOUT field (the flags as bool), rowid and itl_len as one array, written into
    in place chunk by chunk (no second copy of a column), and every gap."""
    n = conn.execute("SELECT count(*) FROM results").fetchone()[0]
    arrays = {name: np.empty((n, *LAYOUT[name].shape),
                             dtype=bool if name in _FLAGS else LAYOUT[name].base)
              for name in LAYOUT.names}
    arrays |= {"rowid": np.empty(n, dtype=np.int64), "itl_len": np.empty(n, dtype=np.int64)}
    gaps, at = [], 0
    conn.text_factory = bytes  # the concatenated blobs are not UTF-8
    try:
        for rowids, rec, itl, itl_len in _binary_chunks(conn):
            rows = slice(at, at + len(rowids))
            if rows.stop > n:
                raise _Unreadable
            for name in LAYOUT.names:
                arrays[name][rows] = rec[name]
            arrays["rowid"][rows], arrays["itl_len"][rows] = rowids, itl_len
            gaps.append(itl)
            at += len(rowids)
    except _Unreadable:
        return None
    finally:
        conn.text_factory = str
    return arrays, np.concatenate(gaps) if gaps else np.zeros(0)


def read_names(conn: sqlite3.Connection, keys: dict[str, np.ndarray]
           ) -> list[Factorised] | None:
    """Per name key, the rows' names factorised (distinct names sorted); None when a name
    is missing (a row whose names were never written: read from its columns)."""
    cur = conn.cursor()
    cur.row_factory = None
    rows = cur.execute("SELECT key, name FROM result_names ORDER BY key").fetchall()
    known = np.array([k for k, _ in rows], dtype=np.int64)
    text = np.array([name for _, name in rows], dtype=object)
    out = []
    for column in keys.values():
        distinct, code = np.unique(column, return_inverse=True)
        at = np.minimum(np.searchsorted(known, distinct), max(len(known) - 1, 0))
        if not len(known) or (known[at] != distinct).any():
            return None
        names = text[at].astype(str)
        order = np.argsort(names, kind="stable")  # by name, as numpy.unique would sort them
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        out.append(Factorised(names[order], rank[code]))
    return out
