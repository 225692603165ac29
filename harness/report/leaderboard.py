"""The leaderboard of a run's candidates: saving (RER) against consistency (exact match,
chrF), each with its interval and verdict, the Pareto front, and the recommendation (the
passing candidate that saves the most). The rows are plain data; the terminal, Markdown,
JSON and HTML reports only lay them out."""

from __future__ import annotations

from dataclasses import dataclass

from exporters.catalogue import CANDIDATE, CHRF, EXACT_MATCH, RER
from exporters.figures import OVERALL, Figure
from harness.gate.family import CandidateVerdict, Estimate, FamilyResult

SAVING, CONSISTENCY = RER, EXACT_MATCH  # the plot's axes
COLUMNS = (RER, EXACT_MATCH, CHRF)


@dataclass(frozen=True)
class Row:
    name: str
    verdict: str
    confidence: float
    cells: dict[str, Estimate]  # figure name -> value and interval
    pareto: bool  # no other candidate saves at least as much and is at least as consistent
    recommended: bool
    reasons: tuple[str, ...]


def _cell(c: CandidateVerdict, name: str) -> Estimate:
    f: Figure | None = next((f for f in c.result.figures if f.name == name
                             and f.arm == CANDIDATE and f.scenario == OVERALL), None)
    if f is None:
        return Estimate(None, None, None)
    return Estimate(f.value, f.ci_low, f.ci_high)


def rows(family: FamilyResult) -> list[Row]:
    """One row per candidate, best saving first."""
    cells = {c.name: {n: _cell(c, n) for n in COLUMNS} for c in family.candidates}
    points = {name: (v[SAVING].value, v[CONSISTENCY].value) for name, v in cells.items()}
    best = family.recommended
    out = [Row(c.name, c.verdict, c.confidence, cells[c.name], _on_front(c.name, points),
               best is not None and best.name == c.name, c.result.reasons)
           for c in family.candidates]
    return sorted(out, key=lambda r: -(r.cells[SAVING].value if r.cells[SAVING].value
                                       is not None else float("-inf")))


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


def fmt(cell: Estimate) -> str:
    if cell.value is None:
        return "—"
    interval = "" if cell.low is None or cell.high is None else \
        f" [{cell.low:.3g}, {cell.high:.3g}]"
    return f"{cell.value:.3g}{interval}"


def to_json(family: FamilyResult) -> list[dict]:
    return [{"name": r.name, "verdict": r.verdict, "confidence": r.confidence,
             "pareto": r.pareto, "recommended": r.recommended,
             **{n: {"value": c.value, "ci_low": c.low, "ci_high": c.high}
                for n, c in r.cells.items()}} for r in rows(family)]
