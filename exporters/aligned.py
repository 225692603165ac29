"""Replay results laid out as numpy columns, one row per request, one block per arm.

Rows are sorted by (scenario, request id) so every figure is independent of the order the
records came in, and each scenario is a contiguous block (the bootstrap's strata).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from exporters.catalogue import BASELINE, BASELINE2, CANDIDATE, arm_lacks
from exporters.records import ArmResult


@dataclass(frozen=True)
class ArmColumns:
    """One arm's answers, aligned to `Aligned.request_ids`; NaN / False where absent."""

    rows: tuple[ArmResult | None, ...]
    present: np.ndarray  # bool
    ok: np.ndarray  # bool
    e2e: np.ndarray
    ttft: np.ndarray
    tokens: np.ndarray  # float, output tokens; NaN where they were counted in characters
    prompt_tokens: np.ndarray  # NaN when the arm did not report usage
    length_stop: np.ndarray  # bool: finish_reason == "length"
    theoretical: np.ndarray  # extension theoretical_saving
    computed_tokens: np.ndarray  # extension computed_tokens
    peak_memory: np.ndarray  # extension peak_memory_bytes
    cache_hits: np.ndarray  # extension prefix_cache_hit_tokens
    cache_queries: np.ndarray  # extension prefix_cache_query_tokens
    # what each answer carried: a count of tokens, the extension, top logprobs
    has: dict[str, np.ndarray]


@dataclass(frozen=True)
class Aligned:
    request_ids: tuple[str, ...]
    scenario_names: tuple[str, ...]  # sorted
    strata: np.ndarray  # int index into scenario_names, non-decreasing
    arms: dict[str, ArmColumns]

    @property
    def n(self) -> int:
        return len(self.request_ids)

    def block(self, scenario: str) -> slice:
        """The contiguous rows of one scenario."""
        s = self.scenario_names.index(scenario)
        lo, hi = np.searchsorted(self.strata, [s, s + 1])
        return slice(int(lo), int(hi))


_EXT_KEYS = ("theoretical_saving", "computed_tokens", "peak_memory_bytes",
             "prefix_cache_hit_tokens", "prefix_cache_query_tokens")
_MISSING = (None,) * (4 + len(_EXT_KEYS))


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else np.nan


def _floats(values: list[tuple]) -> np.ndarray:
    """Rows of numbers-or-None as floats; None and anything not a number become NaN."""
    arr = np.array(values, dtype=object).reshape(len(values), -1)
    arr[np.equal(arr, None)] = np.nan
    try:
        return arr.astype(float)
    except (TypeError, ValueError):  # a string or list where a number belongs
        return np.vectorize(_number, otypes=[float])(arr)


def _values(r: ArmResult | None) -> tuple:
    """The numeric columns of one row, in `ArmColumns` order after `ok`."""
    if r is None:
        return _MISSING
    get = (r.extension or {}).get
    return (r.e2e_s, r.ttft_s, r.output_tokens, r.prompt_tokens or None,
            *(get(k) for k in _EXT_KEYS))


def _carried(rows: list[ArmResult | None]) -> dict[str, np.ndarray]:
    """Per row: whether the answer carried a token count, the `layergate` extension, top
    logprobs (the keys are catalogue.LACKS's)."""
    tests = {"tokens": lambda r: r.tokens_counted, "extension": lambda r: bool(r.extension),
             "top_logprobs": lambda r: bool(r.top_logprobs)}
    return {what: np.array([r is not None and r.ok and test(r) for r in rows], dtype=bool)
            for what, test in tests.items()}


def _arm_columns(rows: list[ArmResult | None]) -> ArmColumns:
    values = _floats([_values(r) for r in rows])
    has = _carried(rows)
    values[~has["tokens"], 2] = np.nan  # characters are no token count
    return ArmColumns(
        tuple(rows),
        np.array([r is not None for r in rows], dtype=bool),
        np.array([r is not None and r.ok for r in rows], dtype=bool),
        *values[:, :4].T,
        np.array([r is not None and r.finish_reason == "length" for r in rows], dtype=bool),
        *values[:, 4:].T,
        has,
    )


def align(results: Iterable[ArmResult]) -> Aligned:
    """Shadow-replay rows (repeat 0) by request; a duplicate (request, arm) is an error."""
    by_arm: dict[str, dict[str, ArmResult]] = {}
    scenario_of: dict[str, str] = {}
    for r in results:
        if r.repeat != 0:
            continue
        arm_rows = by_arm.setdefault(r.arm, {})
        if r.request_id in arm_rows:
            raise ValueError(f"duplicate result for request {r.request_id!r} on arm {r.arm!r}")
        arm_rows[r.request_id] = r
        if r.arm == BASELINE or r.request_id not in scenario_of:
            scenario_of[r.request_id] = r.scenario
    order = sorted(scenario_of, key=lambda rid: (scenario_of[rid], rid))
    names = tuple(sorted(set(scenario_of.values())))
    code = {s: i for i, s in enumerate(names)}
    strata = np.array([code[scenario_of[rid]] for rid in order], dtype=np.int64)
    arms = {arm: _arm_columns([rows.get(rid) for rid in order])
            for arm, rows in sorted(by_arm.items())}
    return Aligned(tuple(order), names, strata, arms)


def compared_arms(al: Aligned) -> tuple[str, ...]:
    """Arms compared against the baseline: the candidate, and baseline2 (the noise floor)."""
    if BASELINE not in al.arms:
        return ()
    return tuple(a for a in (CANDIDATE, BASELINE2) if a in al.arms)


def lacking(al: Aligned, arms: tuple[str, ...], what: str, otherwise: str) -> str:
    """Why a figure over `arms` has no value: the first arm that answered but never carried
    `what` (a key of catalogue.LACKS), in words; else `otherwise`."""
    for arm in arms:
        x = al.arms.get(arm)
        if x is not None and x.ok.any() and not x.has[what].any():
            return arm_lacks(arm, what)
    return otherwise
