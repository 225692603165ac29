"""Requests paired across arms, for the report's per-request views: where outputs part
ways, and which requests diverge worst. (The gated figures come from `exporters`; this is
only what the plots and the side-by-side diff need.)"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from layergate.exporters.catalogue import BASELINE, compared_tokens, same_output
from layergate.exporters.records import ArmResult

_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


@dataclass(frozen=True)
class Pair:
    request_id: str
    scenario: str
    reference: ArmResult  # the baseline
    other: ArmResult

    @property
    def tokens(self) -> tuple[Sequence, Sequence]:
        """Token ids, or words, spaces and punctuation (so a diff can rebuild the text)."""
        return compared_tokens(self.reference, self.other, _WORDS.findall)

    @property
    def divergence(self) -> int | None:
        """Index of the first differing output token; None when the outputs are the same."""
        if same_output(self.reference, self.other):
            return None
        return first_divergence(*self.tokens)

    @property
    def similarity(self) -> float:
        a, b = self.tokens
        return difflib.SequenceMatcher(a=list(a), b=list(b), autojunk=False).ratio()


def first_divergence(a: Sequence, b: Sequence) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def pair_arms(results: Sequence[ArmResult], arm: str, reference: str = BASELINE) -> list[Pair]:
    """Successful requests answered by both `reference` and `arm` (repeat 0)."""
    ref = {r.request_id: r for r in results if r.arm == reference and r.ok and r.repeat == 0}
    return [Pair(r.request_id, r.scenario, ref[r.request_id], r) for r in results
            if r.arm == arm and r.ok and r.repeat == 0 and r.request_id in ref]


def worst(pairs: Sequence[Pair], k: int = 5) -> list[Pair]:
    """The k diverging pairs that part ways earliest (then least similar)."""
    diverging = [p for p in pairs if p.divergence is not None]
    return sorted(diverging, key=lambda p: (p.divergence, p.similarity, p.request_id))[:k]


def word_diff(a: str, b: str) -> list[tuple[str, str, str]]:
    """(op, text in a, text in b) runs over word tokens; op is difflib's tag."""
    wa, wb = _WORDS.findall(a), _WORDS.findall(b)
    matcher = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False)
    return [(op, "".join(wa[i1:i2]), "".join(wb[j1:j2]))
            for op, i1, i2, j1, j2 in matcher.get_opcodes()]
