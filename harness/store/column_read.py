"""Table `results` read from its columns, as an earlier version's rows must be (they carry
no binary summary, `summary.py`): the numbers packed into one text by SQLite and parsed in
bulk, the extension's numbers from SQLite's JSON functions where the stored JSON is strict,
from Python's parser where it is not (a NaN that `json.dumps` wrote)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from layergate.exporters.figures.columns import EXT_KEYS, ResultColumns, digest, number
from layergate.exporters.records import answer_text
from layergate.exporters.tool_calls import from_json
from layergate.harness.store.outputs import empty, with_rowids
from layergate.harness.store.parts_read import read_parts
from layergate.harness.store.rows import present_columns
from layergate.harness.store.sqlite import CHUNK, connect

# the shadow replay's rows: those of no repeat suite (a prompt sent more than once)
REPLAY = ("repeat = 0 AND (arm, request_id, concurrency) NOT IN "
          "(SELECT arm, request_id, concurrency FROM results WHERE repeat > 0)")


def read_columns(path: Path, where: str = REPLAY) -> ResultColumns:
    """The rows `where` selects (default: the shadow replay's, those of no repeat suite),
    in write order, as columns, read from their columns (not their binary summary); their
    outputs are read from `path` when asked for."""
    with contextlib.closing(connect(path)) as conn:
        try:
            return _read(conn, path, where, strict_json=True)
        except sqlite3.OperationalError as exc:
            if "JSON" not in str(exc):
                raise
            return _read(conn, path, where, strict_json=False)


def _num(expr: str) -> str:
    return f"iif({expr} IS NULL, 'nan', printf('%!.17g', {expr}))"  # 17 digits: exact


def _selects(have: set[str], strict_json: bool) -> list[str]:
    """The row as few values as possible: each value costs the sqlite3 module far more
    than the text it carries, so the numbers come packed in one text, parsed in bulk."""
    def col(name: str) -> str:
        return f'"{name}"' if name in have else "NULL"

    flags = ["finish_reason = 'length'", f"{col('tokens_from')} IS NOT 'characters'",
             "extension IS NOT NULL AND extension NOT IN ('{}', 'null')",
             f"{col('top_logprobs')} IS NOT NULL AND {col('top_logprobs')} NOT IN ('[]', 'null')",
             f"{col('token_ids')} IS NOT NULL"]
    numbers = ["ok", *(_num(c) for c in ("e2e_s", "ttft_s", "output_tokens",
                                        "NULLIF(prompt_tokens, 0)")),
               *(f"ifnull({f}, 0)" for f in flags),  # a NULL would void the whole text
               _num(col("send_lag_s"))]
    paths = ", ".join(f"'$.{key}'" for key in EXT_KEYS)
    ext = f"json_extract(extension, {paths})"
    if not strict_json:  # a NaN that json.dumps wrote: SQLite's parser refuses it
        ext = f"iif(json_valid(extension), {ext}, '[x]')"  # x: read by Python
    return ["rowid", "request_id", "arm", "scenario", " || ',' || ".join(numbers),
            ext, col("token_ids"), "output_text", "itl_s", col("tool_calls"), col("refusal")]


def _chunks(conn: sqlite3.Connection, where: str, strict_json: bool) -> Iterator[list[tuple]]:
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: a Row per value would double the cost
    selects = ", ".join(_selects(present_columns(conn), strict_json))
    cur.execute(f"SELECT {selects} FROM results WHERE {where} ORDER BY rowid")
    while rows := cur.fetchmany(CHUNK):
        yield rows


def _floats(texts: list[str]) -> np.ndarray:
    """Comma-separated numbers ('nan' for none), all in one numpy parse."""
    joined = ",".join(t for t in texts if t)
    return np.fromstring(joined, sep=",") if joined else np.zeros(0)


def _gaps(texts: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Parse JSON lists of floats (or NULL) in bulk; (values, count per row)."""
    inner = [t[1:-1].strip() if t else "" for t in texts]
    lengths = np.array([s.count(",") + 1 if s else 0 for s in inner], dtype=np.int64)
    values = _floats(inner)
    if values.size != lengths.sum():
        raise ValueError("malformed itl_s in the store")
    return values, lengths


def _shared(values: tuple, names: dict[str, str]) -> np.ndarray:
    """Few distinct strings as an object array of shared strings (not one per row)."""
    for v in set(values):
        names.setdefault(v, v)
    return np.array(list(map(names.__getitem__, values)), dtype=object)


def _extension(conn: sqlite3.Connection, found: tuple, rowids: tuple) -> np.ndarray:
    """The extension's numbers from SQLite's extracts ('[0.3,19,null,...]'); a row whose
    values are not all numbers or null is read by Python's parser instead."""
    inner = ["null," * (len(EXT_KEYS) - 1) + "null" if t is None else t[1:-1] for t in found]
    simple = [not any(c in t for c in 'tf"{[x') for t in inner]  # true, false, text, nested
    out = np.full((len(inner), len(EXT_KEYS)), np.nan)
    rows = np.flatnonzero(simple)
    if rows.size:
        out[rows] = _floats([inner[i].replace("null", "nan") for i in rows]
                            ).reshape(rows.size, len(EXT_KEYS))
    for i in np.flatnonzero(~np.array(simple, dtype=bool)):
        out[i] = _lenient_ext(conn.execute("SELECT extension FROM results WHERE rowid = ?",
                                           (rowids[i],)).fetchone()[0])
    return out


def _answer(text: str | None, calls: str | None, refusal: str | None) -> str:
    """ArmResult.answer of a row read from its columns."""
    if not calls and not refusal:
        return text or ""
    return answer_text(text or "", from_json(json.loads(calls)) if calls else (), refusal)


def _columns(conn: sqlite3.Connection, parts: dict[str, list], path: Path) -> ResultColumns:
    if not parts:
        return empty()
    arrays = {}
    for key in list(parts):  # one column at a time, its chunks freed: memory x1, not x2
        arrays[key] = np.concatenate(parts.pop(key))
    order = np.argsort(arrays["rowid"], kind="stable")  # rowid order already: no copy then
    found = read_parts(conn, arrays["rowid"][order], arrays["ttft"][order])
    for key, value in found.items():
        arrays[key] = np.empty_like(value)
        arrays[key][order] = value
    return with_rowids(arrays, arrays.pop("rowid"), path)


def _read(conn: sqlite3.Connection, path: Path, where: str, strict_json: bool
          ) -> ResultColumns:
    parts: dict[str, list] = {}
    names: dict[str, str] = {}  # one string object per arm and scenario name

    def add(**arrays: np.ndarray) -> None:
        for key, value in arrays.items():
            parts.setdefault(key, []).append(value)

    for rows in _chunks(conn, where, strict_json):
        rowid, rid, arm, scen, packed, ext, ids, texts, itl, calls, refusals = zip(
            *rows, strict=True)
        nums = _floats(list(packed)).reshape(len(rows), 11)
        flags = nums[:, 5:10].astype(bool)
        gaps, lengths = _gaps(list(itl))
        add(rowid=np.array(rowid, dtype=np.int64), request_id=np.array(rid, dtype=str),
            arm=_shared(arm, names), scenario=_shared(scen, names),
            ok=nums[:, 0].astype(bool), e2e=nums[:, 1], ttft=nums[:, 2],
            output_tokens=nums[:, 3], prompt_tokens=nums[:, 4], length_stop=flags[:, 0],
            tokens_counted=flags[:, 1], has_extension=flags[:, 2],
            has_top_logprobs=flags[:, 3], has_ids=flags[:, 4], send_lag=nums[:, 10],
            ext=_extension(conn, ext, rowid),
            ids_len=np.array([t.count(",") + 1 if t and t != "[]" else 0 for t in ids],
                             dtype=np.int64),
            ids_key=np.array([0 if t is None else digest(t) for t in ids], dtype=np.int64),
            text_key=np.array([digest(_answer(t, c, r)) for t, c, r
                               in zip(texts, calls, refusals, strict=True)], dtype=np.int64),
            itl=gaps, itl_len=lengths)
    return _columns(conn, parts, path)


def _lenient_ext(text: str | None) -> list[float]:
    try:
        ext = json.loads(text) if text else {}
    except ValueError:
        ext = {}
    ext = ext if isinstance(ext, dict) else {}
    return [number(ext.get(k)) for k in EXT_KEYS]
