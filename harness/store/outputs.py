"""A store's outputs (text, token ids, top logprobs) read back by rowid, only for the rows a
calculator asks for: columns read from a store (`ResultColumns.outputs`) carry a reader of
them instead of the outputs themselves."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np

from layergate.exporters.figures.columns import Factorised, Output, ResultColumns
from layergate.exporters.records import answer_text
from layergate.exporters.tool_calls import from_json
from layergate.harness.store.rows import present_columns
from layergate.harness.store.sqlite import CHUNK, connect


class _Outputs:
    """Row indices -> those rows' outputs, read from the store (`outputs`), or only their
    token ids (`token_ids`)."""

    def __init__(self, path: Path, rowids: np.ndarray) -> None:
        self.path, self.rowids = path, rowids

    def __call__(self, idx: np.ndarray) -> list[Output]:
        return outputs(self.path, self.rowids[idx])

    def token_ids(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return token_ids(self.path, self.rowids[idx])


def with_rowids(arrays: dict[str, np.ndarray], rowids: np.ndarray, path: Path,
                factorised: dict[str, Factorised] | None = None,
                itl_start: np.ndarray | None = None) -> ResultColumns:
    """Columns of the store at `path` whose rows are `rowids`: their outputs read from it."""
    read = _Outputs(path, rowids)
    return ResultColumns(**arrays, outputs=read, factorised=factorised or {},
                         token_ids=read.token_ids, itl_start=itl_start)


def rowids(cols: ResultColumns) -> np.ndarray:
    """The store rowid of each row of columns read from a store (`read_scan`)."""
    return cols.outputs.rowids  # type: ignore[attr-defined]


def empty() -> ResultColumns:
    from layergate.exporters.figures.columns import from_results

    return from_results(())


_SCAN = json.JSONDecoder().scan_once  # the C scanner: a third of json.loads' time a value


def _scan_json(text: str) -> object:
    """A JSON value as the store wrote it (json.dumps: no space around it)."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        value, end = None, -1
    return value if end == len(text) else json.loads(text)  # json.loads says what is wrong


def _by_rowid(path: Path, wanted: list[int], columns: str) -> dict[int, tuple]:
    """rowid -> the `columns` of rows `wanted`, CHUNK rowids to a query."""
    found: dict[int, tuple] = {}
    with contextlib.closing(connect(path)) as conn:
        cur = conn.cursor()
        cur.row_factory = None
        for start in range(0, len(wanted), CHUNK):
            ids = json.dumps(sorted(set(wanted[start:start + CHUNK])))
            for rowid, *values in cur.execute(
                    f"SELECT rowid, {columns} FROM results WHERE rowid IN "
                    "(SELECT value FROM json_each(?))", (ids,)):
                found[rowid] = tuple(values)
    return found


def token_ids(path: Path, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The token ids of rows `rowids` (each with token ids), end to end in that order, and
    how many each has: their JSON texts parsed all at once, not one by one."""
    wanted = [int(r) for r in rowids]
    found = _by_rowid(path, wanted, "token_ids")
    texts = [found[r][0] for r in wanted]
    inner = [t[1:-1].strip() for t in texts]  # '[1, 2]' -> '1, 2'
    lengths = np.array([t.count(",") + 1 if t else 0 for t in inner], dtype=np.int64)
    joined = ",".join(t for t in inner if t)
    flat = np.fromstring(joined, dtype=np.int64, sep=",") if joined else \
        np.zeros(0, dtype=np.int64)
    if flat.size != lengths.sum():  # not as json.dumps wrote it: each parsed on its own
        parsed = [_scan_json(t) for t in texts]
        lengths = np.array([len(p) for p in parsed], dtype=np.int64)
        flat = np.fromiter((t for p in parsed for t in p), dtype=np.int64,
                           count=int(lengths.sum()))
    return flat, lengths


def outputs(path: Path, rowids: np.ndarray) -> list[Output]:
    """The outputs of rows `rowids` (text, token ids, top logprobs), in that order."""
    wanted = [int(r) for r in rowids]
    with contextlib.closing(connect(path)) as conn:
        have = present_columns(conn)
    parts = ", ".join(c if c in have else "NULL" for c in ("tool_calls", "refusal"))
    found = _by_rowid(path, wanted, f"output_text, token_ids, top_logprobs, {parts}")
    loads = _scan_json
    out = []
    for r in wanted:
        text, ids_json, top, calls, refusal = found[r]
        made = from_json(loads(calls)) if calls else ()
        out.append(Output(text or "", None if ids_json is None else loads(ids_json),
                          loads(top) if top else None, answer_text(text or "", made, refusal),
                          made))
    return out
