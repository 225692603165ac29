"""What an answer is made of besides its text, against the baseline's, beside A' against A
(the noise floor). Computed only when the run's answers hold any of it.

tool_call_agreement     over paired requests where either arm called a tool: the same
                        calls in the same order, arguments equal as JSON (digests of
                        tool_calls.canonical_calls); detail["differing"] counts which
                        `function.argument` differed, over the whole run
tool_call_validity      per arm, over its answers with calls: every call names a declared
                        function and satisfies its parameters' schema (answer_checks)
structured_validity     per arm, over its answers to requests with a JSON response_format
structured_agreement    over paired such requests: the content parses to the same JSON value
answer_match            over paired requests: the same answer (text, refusal, calls),
                        whatever the reasoning (exact_match compares token ids where both
                        arms give them, which include the reasoning's)
reasoning_kept          over paired requests the baseline reasoned on: the arm reasoned too
reasoning_length_ratio  sum of the arm's reasoning tokens / the baseline's, over paired
                        requests where either reasoned; in characters unless every such
                        pair has both counts (detail["unit"])
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from layergate.exporters.catalogue import (
    ANSWER_MATCH,
    BASELINE,
    BASELINE2,
    CANDIDATE,
    REASONING_KEPT,
    REASONING_LENGTH_RATIO,
    STRUCTURED_AGREEMENT,
    STRUCTURED_VALIDITY,
    TOOL_CALL_AGREEMENT,
    TOOL_CALL_VALIDITY,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.aligned import Aligned, ArmColumns, compared_arms
from layergate.exporters.figures.bootstrap import SumTable
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate
from layergate.exporters.tool_calls import differing_keys

_DIFFERING_SHOWN = 10  # argument keys named in detail["differing"]


def _held(x: ArmColumns) -> dict[str, np.ndarray]:
    """Per row, what the answer held: calls, a checked call, a structured check, reasoning."""
    return {"calls": x.ok & (x.part("tool_calls") > 0),
            "calls_checked": x.ok & np.isfinite(x.part("tool_calls_valid")),
            "structured": x.ok & np.isfinite(x.part("structured_valid")),
            "reasoned": x.ok & (x.part("reasoning_chars") > 0)}


def present(al: Aligned) -> dict[str, bool]:
    """Which of the parts any answer of the run held (figures only for those)."""
    found = {"calls": False, "calls_checked": False, "structured": False, "reasoned": False}
    for x in al.arms.values():
        for key, rows in _held(x).items():
            found[key] |= bool(rows.any())
    return found


def _reasoning(x: ArmColumns, tokens: bool) -> np.ndarray:
    return np.nan_to_num(x.part("reasoning_tokens" if tokens else "reasoning_chars"))


def _in_tokens(al: Aligned) -> bool:
    """Whether every arm's reasoning that happened was counted in tokens."""
    return all(bool(np.isfinite(x.part("reasoning_tokens")[_held(x)["reasoned"]]).all())
               for x in al.arms.values())


def columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    has = present(al)
    if not any(has.values()):
        return {}
    out: dict[str, np.ndarray] = {}
    for arm in (BASELINE, *compared_arms(al)):
        x, p = al.arms[arm], f"parts.{arm}."
        held = _held(x)
        checked = held["calls"] & held["calls_checked"]
        out[p + "calls_n"] = checked.astype(float)
        out[p + "calls_valid"] = (checked & (x.part("tool_calls_valid") == 1)).astype(float)
        out[p + "struct_n"] = held["structured"].astype(float)
        out[p + "struct_valid"] = (held["structured"] & (x.part("structured_valid") == 1)
                                   ).astype(float)
    tokens = _in_tokens(al)
    a = al.arms[BASELINE]
    for arm in compared_arms(al):
        x, p = al.arms[arm], f"parts.{arm}."
        pair = a.ok & x.ok
        ha, hx = _held(a), _held(x)
        calls = pair & (ha["calls"] | hx["calls"])
        out[p + "agree_n"] = calls.astype(float)
        out[p + "agree"] = (calls & (a.part_keys[:, 0] == x.part_keys[:, 0])).astype(float)
        structured = pair & ha["structured"] & hx["structured"]
        same_json = (a.part_keys[:, 1] == x.part_keys[:, 1]) & (a.part_keys[:, 1] != 0)
        out[p + "sagree_n"] = structured.astype(float)
        out[p + "sagree"] = (structured & same_json).astype(float)
        out[p + "answer_n"] = pair.astype(float)
        out[p + "answer"] = (pair & (a.text_key == x.text_key)).astype(float)
        reasoned = pair & ha["reasoned"]
        out[p + "kept_n"] = reasoned.astype(float)
        out[p + "kept"] = (reasoned & hx["reasoned"]).astype(float)
        either = pair & (ha["reasoned"] | hx["reasoned"])
        out[p + "rlen_n"] = either.astype(float)
        out[p + "rlen_x"] = np.where(either, _reasoning(x, tokens), 0.0)
        out[p + "rlen_a"] = np.where(either, _reasoning(a, tokens), 0.0)
    return out


def _ratio(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a > 0, x / np.where(a > 0, a, 1.0), np.nan)


def _share(arm: str, hit: str, n: str, undefined: str) -> SumStat:
    p = f"parts.{arm}."
    return SumStat(lambda h, c: h / c, (p + hit, p + n), p + n, undefined)


def _paired_stats(arm: str) -> dict[str, SumStat]:
    p = f"parts.{arm}."
    return {
        TOOL_CALL_AGREEMENT: _share(arm, "agree", "agree_n",
                                    "no paired request where either arm called a tool"),
        STRUCTURED_AGREEMENT: _share(arm, "sagree", "sagree_n",
                                     "no paired request with a JSON response_format"),
        ANSWER_MATCH: _share(arm, "answer", "answer_n", "no request succeeded on both arms"),
        REASONING_KEPT: _share(arm, "kept", "kept_n", "the baseline reasoned on no paired "
                                                      "request"),
        REASONING_LENGTH_RATIO: SumStat(_ratio,
                                        (p + "rlen_x", p + "rlen_a"), p + "rlen_n",
                                        "the baseline reasoned on no paired request"),
    }


def _level_stats(arm: str) -> dict[str, SumStat]:
    return {TOOL_CALL_VALIDITY: _share(arm, "calls_valid", "calls_n",
                                       "no answer of the arm called a declared tool"),
            STRUCTURED_VALIDITY: _share(arm, "struct_valid", "struct_n",
                                        "no request asked for a JSON response_format")}


# the figures each part makes, so a run shows only those of the parts it held
_NEEDS = {TOOL_CALL_AGREEMENT: "calls", TOOL_CALL_VALIDITY: "calls_checked",
          STRUCTURED_VALIDITY: "structured", STRUCTURED_AGREEMENT: "structured",
          ANSWER_MATCH: None, REASONING_KEPT: "reasoned", REASONING_LENGTH_RATIO: "reasoned"}


def figures(table: SumTable, al: Aligned, config: MetricsConfig) -> list[Figure]:
    has = present(al)
    if not any(has.values()):
        return []
    arms = compared_arms(al)
    unit = "tokens" if _in_tokens(al) else "characters"
    out: list[Figure] = []
    for arm in (BASELINE, *arms):
        floor = _level_stats(BASELINE2) if arm == CANDIDATE and BASELINE2 in arms else None
        for name, stat in _level_stats(arm).items():
            if has[_NEEDS[name]]:
                out += estimate(table, stat, al.scenario_names, config, name, arm,
                                noise=floor[name] if floor else None)
    for arm in arms:
        floor = _paired_stats(BASELINE2) if arm == CANDIDATE and BASELINE2 in arms else None
        differing = _differing(al, arm) if has["calls"] else {}
        for name, stat in _paired_stats(arm).items():
            need = _NEEDS[name]
            if need is not None and not has[need]:
                continue
            def detail(s: int | None, name: str = name, differing: dict = differing) -> dict:
                if name == TOOL_CALL_AGREEMENT and s is None:
                    return {"differing": differing}
                return {"unit": unit} if name == REASONING_LENGTH_RATIO else {}
            out += estimate(table, stat, al.scenario_names, config, name, arm,
                            noise=floor[name] if floor else None, detail=detail)
    return out


def _differing(al: Aligned, arm: str) -> dict[str, int]:
    """Which calls' arguments differed from the baseline's, counted over the run: the
    outputs are read only for the pairs whose calls differ."""
    a, x = al.arms[BASELINE], al.arms[arm]
    pair = a.ok & x.ok & (_held(a)["calls"] | _held(x)["calls"])
    rows = np.flatnonzero(pair & (a.part_keys[:, 0] != x.part_keys[:, 0]))
    counts: Counter[str] = Counter()
    for ra, rx in zip(a.outputs(rows), x.outputs(rows), strict=True):
        counts.update(differing_keys(ra.tool_calls, rx.tool_calls))
    return dict(counts.most_common(_DIFFERING_SHOWN))
