"""Column `parts` read back (summary.PARTS): what the answers held besides their text, for
the rows that held anything (the others' are NULL, read as the defaults), by rowid."""

from __future__ import annotations

import sqlite3

import numpy as np

from layergate.exporters.figures.columns import PART_DIGESTS, PART_KEYS, default_parts
from layergate.harness.store.rows import present_columns
from layergate.harness.store.summary import PARTS

_LAYOUT = np.dtype([("numbers", "<f8", (len(PART_KEYS),)),
                    ("keys", "<i8", (len(PART_DIGESTS),))])


def read_parts(conn: sqlite3.Connection, rowids: np.ndarray, ttft: np.ndarray
               ) -> dict[str, np.ndarray]:
    """`parts` and `part_keys` of the rows `rowids` (sorted, as the scans read them), with
    their TTFTs for the defaults."""
    if "parts" not in present_columns(conn) or not len(rowids):
        return placed_parts(rowids, ttft, np.zeros(0, dtype=np.int64), b"")
    cur = conn.cursor()
    cur.row_factory = None
    found = cur.execute("SELECT rowid, parts FROM results WHERE parts IS NOT NULL "
                        "AND length(parts) = ? ORDER BY rowid", (PARTS.size,)).fetchall()
    return placed_parts(rowids, ttft, np.array([r for r, _ in found], dtype=np.int64),
                        b"".join(blob for _, blob in found))


def placed_parts(rowids: np.ndarray, ttft: np.ndarray, found: np.ndarray, blobs: bytes
                 ) -> dict[str, np.ndarray]:
    """`parts` and `part_keys` of the rows `rowids` (sorted): the defaults, but for the rows
    `found` (rowids, sorted), whose PARTS values `blobs` holds end to end."""
    numbers, keys = default_parts(ttft)
    if len(found):
        rec = np.frombuffer(blobs, dtype=_LAYOUT)
        at = np.searchsorted(rowids, found)
        hit = (at < len(rowids)) & (rowids[np.minimum(at, len(rowids) - 1)] == found)
        numbers[at[hit]] = rec["numbers"][hit]
        keys[at[hit]] = rec["keys"][hit]
    return {"parts": numbers, "part_keys": keys}
