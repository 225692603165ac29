"""Table `results` read once for everything the figures and run checks need (`Scan`), for
figures over a million results: numbers straight into numpy arrays
(`layergate.exporters.figures.columns.ResultColumns`), each output by its digest, and the outputs
themselves read back only for the rows a calculator asks for (`outputs.py`).

Rows written by this version carry their numbers and gaps in binary (`summary.py`), read in
bulk (`summary_read.py`); a store with older rows is read from its columns
(`column_read.py`), by one query each.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from layergate.exporters.figures.answer_tally import Tally
from layergate.exporters.figures.columns import ROW_FIELDS, Factorised, ResultColumns, gap_index
from layergate.harness.store.column_read import REPLAY, read_columns
from layergate.harness.store.outputs import empty, with_rowids
from layergate.harness.store.parts_read import placed_parts
from layergate.harness.store.row_order import aligned_order, reordered
from layergate.harness.store.rows import present_columns
from layergate.harness.store.sqlite import connect
from layergate.harness.store.summary import NAME_KEYS
from layergate.harness.store.summary_read import read_names, read_summaries
from layergate.harness.store.tallies import tallies, tally_factorised


@dataclass(frozen=True)
class Scan:
    """What figures and run checks need of a store, from one pass over it."""

    replay: ResultColumns  # the shadow replay's rows (those of no repeat suite), as columns
    repeated: np.ndarray  # rowids of the repeat suite's rows, in write order
    tallies: list[Tally]  # every row's answer, counted (layergate.exporters.figures.answer_tally)
    send_lag: np.ndarray  # every row's send lag, s (NaN: not recorded)


def read_scan(path: Path) -> Scan:
    """The store at `path` in one pass: rows written by this version carry their numbers in
    binary; older ones are read from their columns, by one query each."""
    with contextlib.closing(connect(path)) as conn:
        if {"summary", "itl_f64"} <= present_columns(conn):
            found = _scan_binary(conn, path)
            if found is not None:
                return found
        repeated = [r for (r,) in conn.execute(
            f"SELECT rowid FROM results WHERE NOT ({REPLAY}) ORDER BY rowid")]
        lag = "send_lag_s" if "send_lag_s" in present_columns(conn) else "NULL"
        lags = [x for (x,) in conn.execute(f"SELECT {lag} FROM results")]
        return Scan(read_columns(path), np.array(repeated, dtype=np.int64), tallies(conn),
                    np.array(lags, dtype=float))


def _scan_binary(conn: sqlite3.Connection, path: Path) -> Scan | None:
    """Every row from its `summary` and `itl_f64` (summary.py), its names from
    `result_names`, a chunk of rows at a time. None when a row lacks them (a store resumed
    from an earlier version's run)."""
    read = read_summaries(conn)
    if read is None:
        return None
    arrays, itl = read.arrays, read.itl
    if not len(arrays["rowid"]):
        return Scan(empty(), np.zeros(0, dtype=np.int64), [], np.zeros(0))
    named = read_names(conn, {k: arrays.pop(k) for k in NAME_KEYS})
    if named is None:
        return None
    rid, arm, scen, tags = named
    repeat, concurrency = arrays.pop("repeat"), arrays.pop("concurrency")
    counted = tally_factorised(arm, scen, tags, arrays["ok"])
    rowids = arrays.pop("rowid")
    arrays |= placed_parts(rowids, arrays["ttft"], read.part_rows, read.parts)
    itl_start = None
    order = None if (repeat > 0).any() else aligned_order(rid, arm, scen)
    if order is not None:  # the figures' order: their columns are slices of these
        itl_start = np.cumsum(arrays["itl_len"]) - arrays["itl_len"]
        reordered(arrays | {"rowid": rowids, "itl_start": itl_start}, order)
        rid, arm, scen = (Factorised(f.values, f.codes[order]) for f in (rid, arm, scen))
    factorised = {"request_id": rid, "arm": arm, "scenario": scen}
    replay = with_rowids(arrays | {name: _shared_names(f) for name, f in factorised.items()}
                         | {"itl": itl}, rowids, path, factorised, itl_start)
    lags = replay.send_lag
    suite = _determinism_suite(replay, repeat, concurrency)
    if suite.any():  # rare: a repeat suite inside the run; its rows leave the columns
        replay = _subset(replay, ~suite, path, rowids)
    return Scan(replay, rowids[suite], counted, lags)


def _shared_names(names: Factorised) -> np.ndarray:
    """Each row's name, as one shared string object per distinct name."""
    return np.array(names.values.tolist(), dtype=object)[names.codes]


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


def _subset(cols: ResultColumns, keep: np.ndarray, path: Path, rowids: np.ndarray
            ) -> ResultColumns:
    """The rows `keep` marks, their gaps with them."""
    arrays = {f: getattr(cols, f)[keep] for f in ROW_FIELDS if f != "itl"}
    arrays["itl"] = cols.itl[gap_index(cols.gap_starts()[keep], cols.itl_len[keep])]
    return with_rowids(arrays, rowids[keep], path,
                       {k: f.take(keep) for k, f in cols.factorised.items()})
