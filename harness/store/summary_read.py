"""Table `results` read from its rows' binary summaries (`summary.py`): each LAYOUT field
as one array, a chunk of rows at a time, with one `numpy.frombuffer` per chunk, and the
rows' names from table `result_names`. A store that cannot be read so (a row written by an
earlier version, without a summary or in an earlier layout) reads as None: the caller reads
it from its columns instead (`column_read.py`)."""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from layergate.exporters.figures.columns import Factorised
from layergate.harness.store.rows import present_columns
from layergate.harness.store.sqlite import CHUNK, connect
from layergate.harness.store.summary import LAYOUT, PARTS

_FLAGS = ("ok", "length_stop", "tokens_counted", "has_extension", "has_top_logprobs", "has_ids")


class _Unreadable(Exception):
    """A chunk the bulk read cannot take: read the store from its columns instead."""


# a chunk of rows as few values: SQLite concatenates their summaries, gaps and parts (blobs
# as text, byte for byte: what group_concat does with a blob in a UTF-8 database; the
# lengths are checked all the same), so Python never makes a value per row. `parts` only
# where a row has them in this layout (parts_read.py), with those rows' rowids.
def _chunk_sql(parts: str) -> str:
    held = f"length(p) = {PARTS.size}"
    return ("SELECT count(*), count(s), count(g), max(r), group_concat(r), "
            "group_concat(s, ''), group_concat(length(g)), group_concat(g, ''), "
            f"group_concat(iif({held}, r, NULL)), group_concat(iif({held}, p, NULL), '') FROM "
            f"(SELECT rowid AS r, summary AS s, itl_f64 AS g, {parts} AS p FROM results "
            "WHERE rowid > ? ORDER BY rowid LIMIT ?)")


class _Chunk(NamedTuple):
    rowids: np.ndarray
    rec: np.ndarray  # LAYOUT
    itl: np.ndarray  # the gaps, end to end
    itl_len: np.ndarray  # gaps per row
    part_rows: np.ndarray  # rowids of the rows with parts
    parts: bytes  # their PARTS, end to end


def _binary_chunks(found: Iterator[tuple]) -> Iterator[_Chunk]:
    """Each chunk's answer to _chunk_sql taken apart; _Unreadable for a row without a
    summary and gaps, or in an earlier layout."""
    for n, n_summary, n_gaps, _top, rowids, summaries, lengths, gaps, part_rows, parts in found:
        if n_summary != n or n_gaps != n or len(summaries) != n * LAYOUT.itemsize:
            raise _Unreadable  # written before the binary summary, or in an earlier layout
        per_row = _ints(lengths, n) // 8
        if int(per_row.sum()) * 8 != len(gaps or b""):
            raise _Unreadable
        held = _ints(part_rows, part_rows.count(b",") + 1) if part_rows else \
            np.zeros(0, dtype=np.int64)
        if len(parts or b"") != len(held) * PARTS.size:
            raise _Unreadable
        yield _Chunk(_ints(rowids, n), np.frombuffer(summaries, dtype=LAYOUT),
                     np.frombuffer(gaps or b"", dtype="<f8"), per_row, held, parts or b"")


class _Reader:
    """The store's row count, then _chunk_sql's answer for each chunk of rows, in rowid
    order, from one snapshot, queried on a thread of its own (SQLite works without the GIL)
    while this one takes the chunk before apart."""

    def __init__(self, path: str, sql: str) -> None:
        self._ahead: queue.Queue = queue.Queue(maxsize=1)  # one answer waiting, no more
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(path, sql),
                                        name="store-reader", daemon=True)
        self._thread.start()

    def _read(self, path: str, sql: str) -> None:
        try:
            with contextlib.closing(connect(path)) as conn:
                conn.text_factory = bytes  # the concatenated blobs are not UTF-8
                cur = conn.cursor()
                cur.row_factory = None
                cur.execute("BEGIN")  # one snapshot: rows written meanwhile are not half in
                self._ahead.put(cur.execute("SELECT count(*) FROM results").fetchone()[0])
                last = 0
                while not self._stop.is_set():
                    found = cur.execute(sql, (last, CHUNK)).fetchone()
                    self._ahead.put(found)
                    if not found[0]:
                        return
                    last = found[3]
        except BaseException as exc:  # noqa: BLE001 - raised again on the reading side
            self._ahead.put(exc)

    def _next(self) -> object:
        found = self._ahead.get()
        if isinstance(found, BaseException):
            raise found
        return found

    def count(self) -> int:
        return self._next()  # type: ignore[return-value]

    def __iter__(self) -> Iterator[tuple]:
        while (found := self._next())[0]:  # type: ignore[index]
            yield found  # type: ignore[misc]

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        while self._thread.is_alive():  # take what it holds, so it sees the stop
            with contextlib.suppress(queue.Empty):
                self._ahead.get(timeout=0.05)


def _ints(text: bytes, n: int) -> np.ndarray:
    """n comma-separated integers (group_concat's), parsed in bulk."""
    out = np.fromstring(text.decode("ascii"), dtype=np.int64, sep=",") if n else \
        np.zeros(0, dtype=np.int64)
    if out.size != n:
        raise _Unreadable
    return out


class Summaries(NamedTuple):
    """Every row's LAYOUT fields (the flags as bool), rowid and itl_len as one array each,
    every gap, and the rows with parts (their rowids and PARTS end to end)."""

    arrays: dict[str, np.ndarray]
    itl: np.ndarray
    part_rows: np.ndarray
    parts: bytes


def read_summaries(conn: sqlite3.Connection) -> Summaries | None:
    """Every row's LAYOUT fields, gaps and parts, from one snapshot: rows a replay writes
    meanwhile are not half in. None when the store has no names table or a row cannot be
    read so."""
    if "result_names" not in {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}:
        return None
    sql = _chunk_sql("parts" if "parts" in present_columns(conn) else "NULL")
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    try:
        with _Reader(path, sql) as reader:
            return _read_binary(reader.count(), _binary_chunks(iter(reader)))
    except _Unreadable:
        return None


_BLOCK = 4096  # rows whose LAYOUT fields are copied out together: they stay in the cache


def _read_binary(n: int, chunks: Iterator[_Chunk]) -> Summaries:
    """The `n` rows' LAYOUT fields, each written into in place chunk by chunk (no second
    copy of a column), and every gap into one array grown as the chunks come (no list of
    them to join)."""
    arrays = {name: np.empty((n, *LAYOUT[name].shape),
                             dtype=bool if name in _FLAGS else LAYOUT[name].base)
              for name in LAYOUT.names}
    arrays |= {"rowid": np.empty(n, dtype=np.int64), "itl_len": np.empty(n, dtype=np.int64)}
    gaps = _Gaps(n)
    part_rows, parts = [], []
    at = 0
    for chunk in chunks:
        rows = len(chunk.rowids)
        if at + rows > n:
            raise _Unreadable
        for lo in range(0, rows, _BLOCK):
            hi = min(lo + _BLOCK, rows)
            block = chunk.rec[lo:hi]
            for name in LAYOUT.names:
                arrays[name][at + lo:at + hi] = block[name]
        arrays["rowid"][at:at + rows], arrays["itl_len"][at:at + rows] = \
            chunk.rowids, chunk.itl_len
        gaps.add(chunk.itl, at + rows)
        part_rows.append(chunk.part_rows)
        parts.append(chunk.parts)
        at += rows
    if at != n:
        raise _Unreadable
    return Summaries(arrays, gaps.done(), np.concatenate(part_rows) if part_rows else
                     np.zeros(0, dtype=np.int64), b"".join(parts))


class _Gaps:
    """Gaps appended chunk by chunk into one array: its room guessed from the gaps per row
    so far, twice over (pages never written are never resident), grown by a copy only when
    a later chunk holds many more gaps per row, trimmed in place at the end."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.out = np.empty(0)
        self.at = 0

    def add(self, gaps: np.ndarray, rows_read: int) -> None:
        need = self.at + len(gaps)
        if need > len(self.out):
            room = max(need, 2 * need * self.rows // max(rows_read, 1))
            grown = np.empty(room)
            grown[:self.at] = self.out[:self.at]
            self.out = grown
        self.out[self.at:need] = gaps
        self.at = need

    def done(self) -> np.ndarray:
        self.out.resize(self.at, refcheck=False)  # in place: the room past it is released
        return self.out


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
