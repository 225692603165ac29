"""Table `results` read as columns (`layergate.exporters.columns.ResultColumns`), for figures over a
million results: numbers straight into numpy arrays, each output by its digest, and the
outputs themselves (text, token ids, top logprobs) read back only for the rows a calculator
asks for.

Rows written by this version carry their numbers and gaps in binary (`summary.py`): read
with one `numpy.frombuffer` per chunk. Older rows are read from their columns: the numbers
packed into one text by SQLite and parsed in bulk, the extension's numbers from SQLite's
JSON functions where the stored JSON is strict, from Python's parser where it is not (a NaN
that `json.dumps` wrote).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layergate.exporters.answers import Tally
from layergate.exporters.columns import (
    EXT_KEYS,
    ROW_FIELDS,
    Factorised,
    Output,
    ResultColumns,
    digest,
    number,
)
from layergate.harness.store.sqlite import connect
from layergate.harness.store.summary import LAYOUT, NAME_KEYS, untag

CHUNK = 50_000  # rows converted at once: bounds the Python objects alive to a few MB


def _present(conn: sqlite3.Connection) -> set[str]:
    return {row[1] for row in conn.execute("PRAGMA table_info(results)")}


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
            ext, col("token_ids"), "output_text", "itl_s"]


REPLAY = ("repeat = 0 AND (arm, request_id, concurrency) NOT IN "
          "(SELECT arm, request_id, concurrency FROM results WHERE repeat > 0)")


def _chunks(conn: sqlite3.Connection, where: str, strict_json: bool) -> Iterator[list[tuple]]:
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: a Row per value would double the cost
    cur.execute(f"SELECT {', '.join(_selects(_present(conn), strict_json))} FROM results "
                f"WHERE {where} ORDER BY rowid")
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


@dataclass(frozen=True)
class Scan:
    """What figures and run checks need of a store, from one pass over it."""

    replay: ResultColumns  # the shadow replay's rows (those of no repeat suite), as columns
    repeated: np.ndarray  # rowids of the repeat suite's rows, in write order
    tallies: list[Tally]  # every row's answer, counted (layergate.exporters.answers)
    send_lag: np.ndarray  # every row's send lag, s (NaN: not recorded)


def read_scan(path: Path) -> Scan:
    """The store at `path` in one pass: rows written by this version carry their numbers in
    binary; older ones are read from their columns, by one query each."""
    with contextlib.closing(connect(path)) as conn:
        if {"summary", "itl_f64"} <= _present(conn):
            found = _scan_binary(conn, path)
            if found is not None:
                return found
        repeated = [r for (r,) in conn.execute(
            f"SELECT rowid FROM results WHERE NOT ({REPLAY}) ORDER BY rowid")]
        lag = "send_lag_s" if "send_lag_s" in _present(conn) else "NULL"
        lags = [x for (x,) in conn.execute(f"SELECT {lag} FROM results")]
        return Scan(read_columns(path), np.array(repeated, dtype=np.int64), tallies(conn),
                    np.array(lags, dtype=float))


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


def tallies(conn: sqlite3.Connection) -> list[Tally]:
    """Answers counted by arm, scenario, ok, token source and quirks (every row)."""
    have = _present(conn)
    tokens_from = "tokens_from" if "tokens_from" in have else "NULL"
    quirks = "quirks" if "quirks" in have else "NULL"
    rows = conn.execute(f"SELECT arm, scenario, ok, {tokens_from}, {quirks}, COUNT(*) "
                        f"FROM results GROUP BY 1, 2, 3, 4, 5").fetchall()
    return _tallies(Counter({(arm, scen, bool(ok), source, q): n
                             for arm, scen, ok, source, q, n in rows}))


def _tallies(counts: Counter) -> list[Tally]:
    return _sorted([Tally(arm, scen, bool(ok), source, tuple(json.loads(q)) if q else (), n)
                    for (arm, scen, ok, source, q), n in counts.items()])


def _sorted(tallies: list[Tally]) -> list[Tally]:
    return sorted(tallies, key=lambda t: (t.arm, t.scenario, t.ok, t.tokens_from or "",
                                          t.quirks))


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


def _scan_binary(conn: sqlite3.Connection, path: Path) -> Scan | None:
    """Every row from its `summary` and `itl_f64` (summary.py), its names from
    `result_names`, a chunk of rows at a time. None when a row lacks them (a store resumed
    from an earlier version's run)."""
    if "result_names" not in {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}:
        return None
    conn.execute("BEGIN")  # one snapshot: rows a replay writes meanwhile are not half in
    try:
        read = _read_binary(conn)
    finally:
        conn.execute("COMMIT")
    if read is None:
        return None
    arrays, itl = read
    if not len(arrays["rowid"]):
        return Scan(_empty(), np.zeros(0, dtype=np.int64), [], np.zeros(0))
    named = _names(conn, {k: arrays.pop(k) for k in NAME_KEYS})
    if named is None:
        return None
    rid, arm, scen, tags = named
    repeat, concurrency = arrays.pop("repeat"), arrays.pop("concurrency")
    counted = _tally(arm, scen, tags, arrays["ok"])
    rowids = arrays.pop("rowid")
    factorised = {"request_id": rid, "arm": arm, "scenario": scen}
    replay = _with_rowids(arrays | {name: _shared_names(f) for name, f in factorised.items()}
                          | {"itl": itl}, rowids, path, factorised)
    lags = replay.send_lag
    suite = _determinism_suite(replay, repeat, concurrency)
    if suite.any():  # rare: a repeat suite inside the run; its rows leave the columns
        replay = _subset(replay, ~suite, path, rowids)
    return Scan(replay, rowids[suite], counted, lags)


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


def _names(conn: sqlite3.Connection, keys: dict[str, np.ndarray]
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


def _shared_names(names: Factorised) -> np.ndarray:
    """Each row's name, as one shared string object per distinct name."""
    return np.array(names.values.tolist(), dtype=object)[names.codes]


def _tally(arm: Factorised, scen: Factorised, tags: Factorised, ok: np.ndarray
           ) -> list[Tally]:
    """Rows counted by arm, scenario, ok and tag (token source and quirks), in numpy."""
    shape = (len(arm.values), len(scen.values), 2, len(tags.values))
    counts = np.bincount(np.ravel_multi_index((arm.codes, scen.codes, ok.astype(np.int64),
                                               tags.codes), shape),
                         minlength=int(np.prod(shape)))
    out = []
    for flat in np.flatnonzero(counts):
        a, s, good, t = np.unravel_index(flat, shape)
        source, quirks = untag(str(tags.values[t]))
        out.append(Tally(str(arm.values[a]), str(scen.values[s]), bool(good), source, quirks,
                         int(counts[flat])))
    return _sorted(out)


def _determinism_suite(cols: ResultColumns, repeat: np.ndarray, concurrency: np.ndarray
                  ) -> np.ndarray:
    """Rows of prompts sent more than once (REPLAY's complement): every row of an (arm,
    request, concurrency) that has a row of repeat > 0."""
    suite = repeat > 0
    if not suite.any():
        return suite
    keys = set(zip(cols.arm[suite].tolist(), cols.request_id[suite].tolist(),
                   concurrency[suite].tolist(), strict=True))
    maybe = np.flatnonzero(~suite & np.isin(cols.request_id, cols.request_id[suite]))
    suite[maybe] = [(cols.arm[i], str(cols.request_id[i]), int(concurrency[i])) in keys
                    for i in maybe]
    return suite


def _columns(parts: dict[str, list], path: Path) -> ResultColumns:
    if not parts:
        return _empty()
    arrays = {}
    for key in list(parts):  # one column at a time, its chunks freed: memory x1, not x2
        arrays[key] = np.concatenate(parts.pop(key))
    return _with_rowids(arrays, arrays.pop("rowid"), path)


def _with_rowids(arrays: dict[str, np.ndarray], rowids: np.ndarray, path: Path,
                 factorised: dict[str, Factorised] | None = None) -> ResultColumns:
    read = _Outputs(path, rowids)
    return ResultColumns(**arrays, outputs=read, factorised=factorised or {},
                         token_ids=read.token_ids)


def rowids(cols: ResultColumns) -> np.ndarray:
    """The store rowid of each row of columns read from a store (`read_scan`)."""
    return cols.outputs.rowids  # type: ignore[attr-defined]


class _Outputs:
    """Row indices -> those rows' outputs, read from the store (`outputs`), or only their
    token ids (`token_ids`)."""

    def __init__(self, path: Path, rowids: np.ndarray) -> None:
        self.path, self.rowids = path, rowids

    def __call__(self, idx: np.ndarray) -> list[Output]:
        return outputs(self.path, self.rowids[idx])

    def token_ids(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return token_ids(self.path, self.rowids[idx])


def _subset(cols: ResultColumns, keep: np.ndarray, path: Path, rowids: np.ndarray
            ) -> ResultColumns:
    """The rows `keep` marks, their gaps with them."""
    arrays = {f: getattr(cols, f)[keep] for f in ROW_FIELDS if f != "itl"}
    arrays["itl"] = cols.itl[np.repeat(keep, cols.itl_len)]
    return _with_rowids(arrays, rowids[keep], path,
                        {k: f.take(keep) for k, f in cols.factorised.items()})


def _read(conn: sqlite3.Connection, path: Path, where: str, strict_json: bool
          ) -> ResultColumns:
    parts: dict[str, list] = {}
    names: dict[str, str] = {}  # one string object per arm and scenario name

    def add(**arrays: np.ndarray) -> None:
        for key, value in arrays.items():
            parts.setdefault(key, []).append(value)

    for rows in _chunks(conn, where, strict_json):
        rowid, rid, arm, scen, packed, ext, ids, texts, itl = zip(*rows, strict=True)
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
            text_key=np.array([digest(t or "") for t in texts], dtype=np.int64),
            itl=gaps, itl_len=lengths)
    return _columns(parts, path)


def _lenient_ext(text: str | None) -> list[float]:
    try:
        ext = json.loads(text) if text else {}
    except ValueError:
        ext = {}
    ext = ext if isinstance(ext, dict) else {}
    return [number(ext.get(k)) for k in EXT_KEYS]


def _empty() -> ResultColumns:
    from layergate.exporters.columns import from_results

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
    found = _by_rowid(path, wanted, "output_text, token_ids, top_logprobs")
    loads = _scan_json
    out = []
    for r in wanted:
        text, ids_json, top = found[r]
        out.append(Output(text or "", None if ids_json is None else loads(ids_json),
                          loads(top) if top else None))
    return out
