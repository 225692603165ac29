"""A store's answers counted (`layergate.exporters.figures.answer_tally.Tally`): by arm,
scenario, ok, token source and quirks, over every row, by SQL from the rows' columns or in
numpy from their binary summaries; sorted alike either way."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import numpy as np

from layergate.exporters.figures.answer_tally import Tally
from layergate.exporters.figures.columns import Factorised
from layergate.harness.store.rows import present_columns
from layergate.harness.store.summary import untag


def tallies(conn: sqlite3.Connection) -> list[Tally]:
    """Answers counted by arm, scenario, ok, token source and quirks (every row)."""
    have = present_columns(conn)
    tokens_from = "tokens_from" if "tokens_from" in have else "NULL"
    quirks = "quirks" if "quirks" in have else "NULL"
    rows = conn.execute(f"SELECT arm, scenario, ok, {tokens_from}, {quirks}, COUNT(*) "
                        f"FROM results GROUP BY 1, 2, 3, 4, 5").fetchall()
    counts = Counter({(arm, scen, bool(ok), source, q): n
                      for arm, scen, ok, source, q, n in rows})
    return _sorted([Tally(arm, scen, bool(ok), source, tuple(json.loads(q)) if q else (), n)
                    for (arm, scen, ok, source, q), n in counts.items()])


def tally_factorised(arm: Factorised, scen: Factorised, tags: Factorised, ok: np.ndarray
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


def _sorted(tallies: list[Tally]) -> list[Tally]:
    return sorted(tallies, key=lambda t: (t.arm, t.scenario, t.ok, t.tokens_from or "",
                                          t.quirks))
