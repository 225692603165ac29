"""What each arm's answers carried, counted: where their token counts came from
(catalogue.TOKEN_SOURCES) and how their servers departed from the protocol
(catalogue.QUIRKS). The reports show it beside the figures, so a reader sees why a figure
of a foreign arm is missing or what its counts rest on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from exporters.catalogue import RECORDED
from exporters.records import ArmResult

UNRECORDED = "unrecorded"  # a run written before answers said where their counts came from


def answer_summary(results: Iterable[ArmResult]) -> dict[str, dict[str, dict[str, int]]]:
    """arm -> {"tokens_from": {source: answers}, "quirks": {quirk: answers}} over the arm's
    successful answers (token sources) and all its answers (quirks), arms sorted."""
    sources: dict[str, Counter] = {}
    quirks: dict[str, Counter] = {}
    for r in results:
        if r.arm == RECORDED:
            continue
        sources.setdefault(r.arm, Counter())
        quirks.setdefault(r.arm, Counter()).update(r.quirks)
        if r.ok:
            sources[r.arm][r.tokens_from or UNRECORDED] += 1
    return {arm: {"tokens_from": dict(sorted(sources[arm].items())),
                  "quirks": dict(sorted(quirks[arm].items()))} for arm in sorted(sources)}


def describe(counts: dict[str, int]) -> str:
    """`usage ×6, logprobs ×2`, or `—` when empty."""
    return ", ".join(f"{key} ×{n}" for key, n in counts.items()) or "—"
