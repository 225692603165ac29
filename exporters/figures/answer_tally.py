"""What each arm's answers carried, counted: where their token counts came from
(catalogue.TOKEN_SOURCES) and how their servers departed from the protocol
(catalogue.QUIRKS). The reports show it beside the figures, so a reader sees why a figure
of a foreign arm is missing or what its counts rest on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from layergate.exporters.catalogue import RECORDED
from layergate.exporters.records import ArmResult

UNRECORDED = "unrecorded"  # a run written before answers said where their counts came from


@dataclass(frozen=True)
class Tally:
    """How many answers of one arm and scenario share ok, token source and quirks: what the
    summaries and the gate's run checks count (a store counts them without reading rows)."""

    arm: str
    scenario: str
    ok: bool
    tokens_from: str | None
    quirks: tuple[str, ...]
    count: int


def tallies(results: Iterable[ArmResult]) -> list[Tally]:
    counts = Counter((r.arm, r.scenario, r.ok, r.tokens_from, tuple(r.quirks)) for r in results)
    return [Tally(*key, n) for key, n in counts.items()]


def answer_summary(results: Iterable[ArmResult] | Iterable[Tally]
                   ) -> dict[str, dict[str, dict[str, int]]]:
    """arm -> {"tokens_from": {source: answers}, "quirks": {quirk: answers}} over the arm's
    successful answers (token sources) and all its answers (quirks), arms sorted."""
    sources: dict[str, Counter] = {}
    quirks: dict[str, Counter] = {}
    for t in as_tallies(results):
        if t.arm == RECORDED:
            continue
        sources.setdefault(t.arm, Counter())
        mine = quirks.setdefault(t.arm, Counter())
        for quirk in t.quirks:
            mine[quirk] += t.count
        if t.ok:
            sources[t.arm][t.tokens_from or UNRECORDED] += t.count
    return {arm: {"tokens_from": dict(sorted(sources[arm].items())),
                  "quirks": dict(sorted(quirks[arm].items()))} for arm in sorted(sources)}


def as_tallies(results: Iterable[ArmResult] | Iterable[Tally]) -> list[Tally]:
    """Tallies as given, or counted from results."""
    rows = list(results)
    return rows if all(isinstance(r, Tally) for r in rows) else tallies(rows)  # type: ignore


def describe(counts: dict[str, int]) -> str:
    """`usage ×6, logprobs ×2`, or `—` when empty."""
    return ", ".join(f"{key} ×{n}" for key, n in counts.items()) or "—"
