"""Table `results` read as columns (`exporters.columns.ResultColumns`), for figures over a
million results: numbers straight into numpy arrays, each output by its digest, and the
outputs themselves (text, token ids, top logprobs) read back only for the rows a calculator
asks for. The extension's numbers come from SQLite's JSON functions where the stored JSON
is strict, from Python's parser where it is not (a NaN that `json.dumps` wrote).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from exporters.columns import EXT_KEYS, ResultColumns, number
from exporters.records import ArmResult
from harness.store.rows import decode
from harness.store.sqlite import connect

CHUNK = 50_000  # rows converted at once: bounds the Python objects alive to a few MB
_ITL_PARSED_AT_ONCE = 1 << 24  # characters of gap JSON parsed by one numpy call


def _present(conn: sqlite3.Connection) -> set[str]:
    return {row[1] for row in conn.execute("PRAGMA table_info(results)")}


def _selects(have: set[str]) -> list[str]:
    def col(name: str, default: str = "NULL") -> str:
        return f'"{name}"' if name in have else default

    # a JSON number, else NULL (as exporters.columns.number: a bool is no number)
    ext = [f"CASE WHEN json_valid(extension) AND json_type(extension, '$.{key}') IN "
           f"('integer', 'real') THEN json_extract(extension, '$.{key}') END"
           for key in EXT_KEYS]
    return ["rowid", "request_id", "arm", "scenario", "ok", "e2e_s", "ttft_s",
            "output_tokens", "NULLIF(prompt_tokens, 0)", "finish_reason = 'length'",
            f"{col('tokens_from')} IS NOT 'characters'",
            "extension IS NOT NULL AND extension NOT IN ('{}', 'null')",
            f"{col('top_logprobs')} IS NOT NULL AND {col('top_logprobs')} NOT IN ('[]', 'null')",
            "json_valid(extension)", "extension", *ext,
            col("token_ids"), "output_text", "itl_s"]


REPLAY = ("repeat = 0 AND (arm, request_id, concurrency) NOT IN "
          "(SELECT arm, request_id, concurrency FROM results WHERE repeat > 0)")


def _chunks(conn: sqlite3.Connection, where: str) -> Iterator[list[tuple]]:
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: a Row per value would double the cost
    cur.execute(f"SELECT {', '.join(_selects(_present(conn)))} FROM results "
                f"WHERE {where} ORDER BY rowid")
    while rows := cur.fetchmany(CHUNK):
        yield rows


def _gaps(texts: list[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Parse JSON lists of floats (or NULL) in bulk; (values, count per row)."""
    inner = [t[1:-1].strip() if t else "" for t in texts]
    lengths = np.array([s.count(",") + 1 if s else 0 for s in inner], dtype=np.int64)
    parts, batch, size = [], [], 0
    for s in inner:
        if s:
            batch.append(s)
            size += len(s)
        if size > _ITL_PARSED_AT_ONCE:
            parts.append(np.array(",".join(batch).split(","), dtype=float))
            batch, size = [], 0
    if batch:
        parts.append(np.array(",".join(batch).split(","), dtype=float))
    values = np.concatenate(parts) if parts else np.zeros(0)
    if values.size != lengths.sum():
        raise ValueError("malformed itl_s in the store")
    return values, lengths


def read_columns(path: Path, where: str = REPLAY) -> ResultColumns:
    """The rows `where` selects (default: the shadow replay's, those of no repeat suite),
    in write order, as columns; their outputs are read from `path` when asked for."""
    with contextlib.closing(connect(path)) as conn:
        return _read(conn, path, where)


def _read(conn: sqlite3.Connection, path: Path, where: str) -> ResultColumns:
    cols: dict[str, list] = {k: [] for k in (
        "rowid", "request_id", "arm", "scenario", "ok", "e2e", "ttft", "output_tokens",
        "prompt_tokens", "length_stop", "tokens_counted", "has_extension", "has_top_logprobs",
        "ext", "has_ids", "ids_len", "ids_key", "text_key", "itl", "itl_len")}
    for rows in _chunks(conn, where):
        (rowid, rid, arm, scen, ok, e2e, ttft, out_tok, prompt, length, counted, has_ext,
         has_top, valid_ext, ext_json, *rest) = zip(*rows, strict=True)
        ext_values, (ids, texts, itl) = rest[:len(EXT_KEYS)], rest[len(EXT_KEYS):]
        for key, values in (("rowid", rowid), ("ok", ok), ("length_stop", length),
                            ("tokens_counted", counted), ("has_extension", has_ext),
                            ("has_top_logprobs", has_top)):
            cols[key].append(np.array(values, dtype=np.int64))
        for key, values in (("request_id", rid), ("arm", arm), ("scenario", scen)):
            cols[key].append(np.array(values, dtype=object))
        for key, values in (("e2e", e2e), ("ttft", ttft), ("output_tokens", out_tok),
                            ("prompt_tokens", prompt)):
            cols[key].append(_floats(values))
        ext = np.stack([_floats(v) for v in ext_values], axis=1) if rows else np.zeros((0, 5))
        for i in np.flatnonzero(~np.array(valid_ext, dtype=bool)):
            ext[i] = _lenient_ext(ext_json[i])
        cols["ext"].append(ext)
        cols["has_ids"].append(np.array([t is not None for t in ids], dtype=bool))
        cols["ids_len"].append(np.array([t.count(",") + 1 if t and t != "[]" else 0
                                         for t in ids], dtype=np.int64))
        cols["ids_key"].append(np.array([0 if t is None else hash(t) for t in ids],
                                        dtype=np.int64))
        cols["text_key"].append(np.array([hash(t or "") for t in texts], dtype=np.int64))
        values, lengths = _gaps(list(itl))
        cols["itl"].append(values)
        cols["itl_len"].append(lengths)
    if not cols["rowid"]:
        return _empty()
    arrays = {k: np.concatenate(v) for k, v in cols.items()}
    for key in ("ok", "length_stop", "tokens_counted", "has_extension", "has_top_logprobs"):
        arrays[key] = arrays[key].astype(bool)
    rowids = arrays.pop("rowid")
    return ResultColumns(**arrays, outputs=lambda idx: outputs(path, rowids[idx]))


def _floats(values: tuple) -> np.ndarray:
    """Numbers and NULLs as floats (NULL: NaN); anything else as `number` reads it."""
    try:
        return np.array(values, dtype=float)
    except (TypeError, ValueError):  # a string where a number belongs
        return np.array([number(v) for v in values], dtype=float)


def _lenient_ext(text: str | None) -> list[float]:
    try:
        ext = json.loads(text) if text else {}
    except ValueError:
        ext = {}
    ext = ext if isinstance(ext, dict) else {}
    return [number(ext.get(k)) for k in EXT_KEYS]


def _empty() -> ResultColumns:
    from exporters.columns import from_results

    return from_results(())


def outputs(path: Path, rowids: np.ndarray) -> list[ArmResult]:
    """The rows `rowids` as records, in that order (read in chunks of CHUNK)."""
    with contextlib.closing(connect(path)) as conn:
        return _outputs(conn, [int(r) for r in rowids])


def _outputs(conn: sqlite3.Connection, wanted: list[int]) -> list[ArmResult]:
    found: dict[int, ArmResult] = {}
    for start in range(0, len(wanted), CHUNK):
        part = sorted(set(wanted[start:start + CHUNK]))
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS wanted_rows (id INTEGER PRIMARY KEY)")
        conn.execute("DELETE FROM wanted_rows")
        conn.executemany("INSERT INTO wanted_rows VALUES (?)", ((r,) for r in part))
        for row in conn.execute("SELECT results.rowid AS _rowid, results.* FROM results "
                                "JOIN wanted_rows ON results.rowid = wanted_rows.id"):
            found[row["_rowid"]] = decode(row)
    return [found[r] for r in wanted]
