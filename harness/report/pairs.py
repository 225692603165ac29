"""Requests paired across arms, for the report's per-request views: where outputs part
ways, which requests diverge worst, and how two answers' tool calls differ. (The gated
figures come from `exporters`; this is only what the plots and the side-by-side diffs
need.)"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from layergate.exporters.catalogue import BASELINE, compared_tokens, same_output
from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import ToolCall, agree

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

    @property
    def has_calls(self) -> bool:
        """Either answer called a tool."""
        return bool(self.reference.tool_calls or self.other.tool_calls)

    @property
    def calls_differ(self) -> bool:
        """Either answer called a tool and the calls are not the same (tool_calls.agree:
        names in order, arguments equal as JSON), as tool_call_agreement counts them."""
        return self.has_calls and not agree(self.reference.tool_calls, self.other.tool_calls)

    @property
    def reasoned(self) -> bool:
        """Either answer reasoned."""
        return any(r.reasoning_text or (r.reasoning_tokens or 0) > 0
                   for r in (self.reference, self.other))


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


def _order(p: Pair) -> tuple:
    return p.divergence, p.similarity, p.request_id


def worst(pairs: Sequence[Pair], k: int = 5, calls: int = 0) -> list[Pair]:
    """The k diverging pairs that part ways earliest (then least similar). With `calls`,
    up to that many of them are pairs whose tool calls differ (the earliest such), so a
    changed call is shown even where text answers part ways earlier."""
    diverging = sorted((p for p in pairs if p.divergence is not None), key=_order)
    kept = [p for p in diverging if p.calls_differ][:min(calls, k)]
    rest = [p for p in diverging if all(p is not q for q in kept)][:k - len(kept)]
    return sorted(kept + rest, key=_order)


@dataclass(frozen=True)
class CallDiff:
    """One line of a tool-call diff: call `index` of the two answers.

    `kind`: `same` (the call agrees), `argument` (argument `key` differs: `before` and
    `after` its values as JSON, None where that side lacks the key), `arguments` (the
    arguments, not objects, differ as JSON values), `unparsed` (either side's arguments do
    not parse: both shown as sent, `raw` says which), `renamed` (another function is
    called), `missing` (the other answer lacks the call) or `extra` (only the other answer
    makes it); for the last three `before` / `after` are the whole calls as `name(args)`.
    """

    index: int
    kind: str
    name: str | None
    other_name: str | None = None
    key: str | None = None
    before: str | None = None
    after: str | None = None
    raw: tuple[bool, bool] = (False, False)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _whole(call: ToolCall) -> str:
    args = call.canonical()
    return f"{call.name}({call.arguments if args is None else args})"


def call_diff(a: Sequence[ToolCall], b: Sequence[ToolCall]) -> list[CallDiff]:
    """How the calls `b` differ from `a`, call by call in order; the argument keys named
    are those of tool_calls.differing_keys."""
    out: list[CallDiff] = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if y is None:
            if x is not None:
                out.append(CallDiff(i, "missing", x.name, before=_whole(x)))
            continue
        if x is None:
            out.append(CallDiff(i, "extra", y.name, after=_whole(y)))
            continue
        if x.name != y.name:
            out.append(CallDiff(i, "renamed", x.name, y.name, before=_whole(x),
                                after=_whole(y)))
            continue
        (ok_x, vx), (ok_y, vy) = x.parsed(), y.parsed()
        if not (ok_x and ok_y):
            out.append(CallDiff(i, "unparsed", x.name,
                                before=x.arguments if not ok_x else _json(vx),
                                after=y.arguments if not ok_y else _json(vy),
                                raw=(not ok_x, not ok_y)))
        elif isinstance(vx, dict) and isinstance(vy, dict):
            keys = [k for k in sorted(set(vx) | set(vy))
                    if (k in vx) != (k in vy) or _json(vx.get(k)) != _json(vy.get(k))]
            out += [CallDiff(i, "argument", x.name, key=k,
                             before=_json(vx[k]) if k in vx else None,
                             after=_json(vy[k]) if k in vy else None) for k in keys]
            if not keys:
                out.append(CallDiff(i, "same", x.name))
        elif _json(vx) != _json(vy):
            out.append(CallDiff(i, "arguments", x.name, before=_json(vx), after=_json(vy)))
        else:
            out.append(CallDiff(i, "same", x.name))
    return out


def reasoning_length(result: ArmResult) -> str:
    """How long an answer's reasoning was, in words: its tokens where the usage gave them,
    and its characters ("none" where it did not reason)."""
    if not result.reasoning_text and not result.reasoning_tokens:
        return "none"
    chars = f"{len(result.reasoning_text):,} characters"
    if result.reasoning_tokens is not None:
        return f"{result.reasoning_tokens:,} tokens ({chars})"
    return chars


def word_diff(a: str, b: str) -> list[tuple[str, str, str]]:
    """(op, text in a, text in b) runs over word tokens; op is difflib's tag."""
    wa, wb = _WORDS.findall(a), _WORDS.findall(b)
    matcher = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False)
    return [(op, "".join(wa[i1:i2]), "".join(wb[j1:j2]))
            for op, i1, i2, j1, j2 in matcher.get_opcodes()]
