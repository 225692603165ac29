"""The leaderboard of a run's candidates: saving (RER, or from a capacity sweep of the
candidate 1 − 1/capacity ratio: harness/gate/fixed/saving.py) against consistency (exact match,
chrF) or, when the traffic has reference answers, against accuracy (the candidate's
accuracy and its paired delta from the baseline), each with its interval and verdict, the
Pareto front (on saving and accuracy_delta, else exact match), and the recommendation (the
passing candidate that saves the most). The rows are plain data; the terminal, Markdown,
JSON and HTML reports only lay them out."""

from __future__ import annotations

from dataclasses import dataclass

from layergate.exporters.catalogue import (
    ACCURACY,
    ACCURACY_DELTA,
    CANDIDATE,
    CAPACITY,
    CAPACITY_RATIO,
    CHRF,
    EXACT_MATCH,
    OVERALL,
    RER,
)
from layergate.harness.gate import CandidateVerdict, Estimate, FamilyResult, Saving
from layergate.harness.report.json_report import finite

SAVING, CONSISTENCY = "saving", EXACT_MATCH  # the plot's axes (CONSISTENCY: without accuracy)
COLUMNS = (SAVING, RER, EXACT_MATCH, CHRF)
ACCURACY_COLUMNS = (ACCURACY, ACCURACY_DELTA)  # shown when the run has reference answers
SOURCES = {RER: "RER", CAPACITY_RATIO: CAPACITY}  # what a saving was measured as, in words


@dataclass(frozen=True)
class Row:
    name: str
    verdict: str
    confidence: float
    cells: dict[str, Estimate]  # column -> value and interval
    saving: Saving
    pareto: bool  # no other candidate saves at least as much and is at least as consistent
    recommended: bool
    reasons: tuple[str, ...]


def _cell(c: CandidateVerdict, name: str) -> Estimate:
    return Estimate.of(next((f for f in c.shown.figures if f.name == name
                             and f.arm == CANDIDATE and f.scenario == OVERALL), None))


def rows(family: FamilyResult) -> list[Row]:
    """One row per candidate, best saving first."""
    savings = {c.name: c.saving for c in family.candidates}
    scored = any(_cell(c, ACCURACY_DELTA).value is not None for c in family.candidates)
    shown = COLUMNS + ACCURACY_COLUMNS if scored else COLUMNS
    cells = {c.name: {SAVING: savings[c.name].estimate,
                      **{n: _cell(c, n) for n in shown if n != SAVING}}
             for c in family.candidates}
    y = ACCURACY_DELTA if scored else CONSISTENCY
    points = {name: (v[SAVING].value, v[y].value) for name, v in cells.items()}
    best = family.recommended
    out = [Row(c.name, c.verdict, c.confidence, cells[c.name], savings[c.name],
               _on_front(c.name, points), best is not None and best.name == c.name,
               c.result.reasons)
           for c in family.candidates]
    return sorted(out, key=lambda r: -r.saving.key)


def _on_front(name: str, points: dict[str, tuple[float | None, float | None]]) -> bool:
    x, y = points[name]
    if x is None or y is None:
        return False
    for other, (ox, oy) in points.items():
        if other == name or ox is None or oy is None:
            continue
        if ox >= x and oy >= y and (ox > x or oy > y):
            return False
    return True


def columns(board: list[Row]) -> tuple[str, ...]:
    """The columns the rows hold: COLUMNS, and the accuracy ones when the run has them."""
    return tuple(board[0].cells) if board else COLUMNS


def vertical(board: list[Row]) -> str:
    """What the plot's vertical axis shows: accuracy_delta where the rows have it."""
    return ACCURACY_DELTA if ACCURACY_DELTA in columns(board) else CONSISTENCY


def against(board: list[Row]) -> str:
    """What the saving is weighed against, in a word: consistency, or accuracy."""
    return ACCURACY if vertical(board) == ACCURACY_DELTA else "consistency"


def fmt(cell: Estimate) -> str:
    if cell.value is None:
        return "—"
    interval = "" if cell.low is None or cell.high is None else \
        f" [{cell.low:.3g}, {cell.high:.3g}]"
    return f"{cell.value:.3g}{interval}"


def cell_text(row: Row, column: str) -> str:
    """A cell as the tables show it: the saving says what it was measured as."""
    if column != SAVING or row.saving.source == RER:
        return fmt(row.cells[column])
    return f"{fmt(row.cells[column])} (capacity ×{fmt(row.saving.measured)})"


def notes(board: list[Row]) -> list[str]:
    """What a reader must know beside the table: a saving whose capacity interval is not
    what the other intervals are (a single sweep's is its sampling noise only)."""
    return [f"{r.name}: its saving's capacity interval is {r.saving.interval}; for one "
            "that covers, sweep again with --replicates 8 --restart CMD"
            for r in board if r.saving.interval]


def to_json(family: FamilyResult) -> list[dict]:
    return [{"name": r.name, "verdict": r.verdict, "confidence": r.confidence,
             "pareto": r.pareto, "recommended": r.recommended,
             **{n: _json(c) for n, c in r.cells.items()},
             "saving": {**_json(r.saving.estimate), "source": r.saving.source,
                        "measured": _json(r.saving.measured),
                        **({"interval": r.saving.interval} if r.saving.interval else {})}}
            for r in rows(family)]


def _json(c: Estimate) -> dict:
    return {"value": finite(c.value), "ci_low": finite(c.low), "ci_high": finite(c.high)}
