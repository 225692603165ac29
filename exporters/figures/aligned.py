"""Replay results laid out as numpy columns, one row per request, one block per arm.

Rows are sorted by (scenario, request id) so every figure is independent of the order the
results came in, and each scenario is a contiguous block (the bootstrap's strata).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from layergate.exporters.catalogue import BASELINE, BASELINE2, CANDIDATE, arm_lacks
from layergate.exporters.figures.columns import (
    PART_KEYS,
    Output,
    Outputs,
    ResultColumns,
    TokenIds,
    flat_token_ids,
    from_results,
    unique_codes,
)
from layergate.exporters.records import ArmResult


@dataclass(frozen=True)
class ArmColumns:
    """One arm's answers, aligned to `Aligned.request_ids`; NaN / False where absent."""

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
    cache_hits: np.ndarray  # per request (ArmResult.per_request): prefix_cache_hit_tokens
    cache_queries: np.ndarray  # prefix_cache_query_tokens
    draft_tokens: np.ndarray  # draft_tokens_proposed
    draft_accepted: np.ndarray  # draft_tokens_accepted
    drafts: np.ndarray  # draft_steps
    # what each answer carried: a count of tokens, the extension, top logprobs
    has: dict[str, np.ndarray]
    has_ids: np.ndarray  # bool: token ids returned
    ids_len: np.ndarray  # int
    ids_key: np.ndarray  # digests of the outputs (layergate.exporters.figures.columns)
    text_key: np.ndarray
    itl_start: np.ndarray  # int: where each row's gaps start in `all_itl`
    itl_len: np.ndarray  # int: how many gaps each row has (0 where absent)
    # every result's gaps (`ResultColumns.itl`), shared by the arms; None once let go
    all_itl: np.ndarray | None
    # what each answer held besides its text (columns.PART_KEYS; defaults where absent)
    parts: np.ndarray
    part_keys: np.ndarray  # columns.PART_DIGESTS (0 where absent)
    source: np.ndarray  # row in the `ResultColumns` (-1: absent)
    _outputs: Outputs
    _token_ids: TokenIds | None  # in bulk where the reader can (ResultColumns.token_ids)

    def part(self, key: str) -> np.ndarray:
        """One of columns.PART_KEYS, per row."""
        return self.parts[:, PART_KEYS.index(key)]

    def outputs(self, rows: np.ndarray) -> Sequence[Output | ArmResult]:
        """The outputs (text, token ids, top logprobs) of these rows, all present."""
        return self._outputs(self.source[rows]) if len(rows) else []

    def token_ids(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The token ids of these rows (all present, all with ids) end to end, and how many
        each has."""
        if not len(rows):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if self._token_ids is None:
            return flat_token_ids(self.outputs(rows))
        return self._token_ids(self.source[rows])

    def gaps(self, rows: np.ndarray) -> np.ndarray:
        """The inter-token gaps of `rows`, concatenated in that order (copied a block of
        rows at a time: no index as long as the gaps)."""
        if self.all_itl is None:
            raise ValueError("the gaps were let go (Aligned.without_gaps)")
        lengths = self.itl_len[rows]
        out = np.empty(int(lengths.sum()))
        at = 0
        for lo in range(0, len(rows), _GAP_BLOCK):
            n, start = lengths[lo:lo + _GAP_BLOCK], self.itl_start[rows[lo:lo + _GAP_BLOCK]]
            total = int(n.sum())
            shift = np.repeat(start - (np.cumsum(n) - n), n)  # gap k of the block: start + k
            out[at:at + total] = self.all_itl[shift + np.arange(total)]
            at += total
        return out


_GAP_BLOCK = 65_536  # rows whose gaps are gathered at once


@dataclass(frozen=True)
class Aligned:
    request_ids: tuple[str, ...]
    scenario_names: tuple[str, ...]  # sorted
    strata: np.ndarray  # int index into scenario_names, non-decreasing
    arms: dict[str, ArmColumns]

    @property
    def n(self) -> int:
        return len(self.request_ids)

    def without_gaps(self) -> Aligned:
        """The same rows without their inter-token gaps (the largest array of a run: tens
        of gaps a row), once the figures that read them are made."""
        return replace(self, arms={a: replace(x, all_itl=None) for a, x in self.arms.items()})

    def block(self, scenario: str) -> slice:
        """The contiguous rows of one scenario."""
        s = self.scenario_names.index(scenario)
        lo, hi = np.searchsorted(self.strata, [s, s + 1])
        return slice(int(lo), int(hi))


class _Source:
    """Where an arm's aligned rows are in the columns (`src`: a row each, -1 where absent),
    and how to take them: a slice when they are there in order (a store read in align's
    order, harness/store/row_order.py), so the arm's columns are views, not copies."""

    def __init__(self, src: np.ndarray) -> None:
        self.src = src
        whole = len(src) and src[0] >= 0 and src[-1] - src[0] == len(src) - 1 \
            and bool((np.diff(src) == 1).all())
        self.run = slice(int(src[0]), int(src[-1]) + 1) if whole else None
        self.full = self.run is not None or (len(src) and src.min() >= 0)

    def take(self, values: np.ndarray, fill: object) -> np.ndarray:
        if self.run is not None:
            view = values[self.run]  # the same numbers, no copy: read-only
            view.flags.writeable = False
            return view
        if self.full:  # the arm answered every request: no fill
            return values[self.src]
        out = np.full(self.src.shape + values.shape[1:], fill, dtype=values.dtype)
        got = self.src >= 0
        out[got] = values[self.src[got]]
        return out


def _arm_columns(cols: ResultColumns, src: np.ndarray, itl_start: np.ndarray) -> ArmColumns:
    present = src >= 0
    take = _Source(src).take
    ok = take(cols.ok, False)
    counted = ok & take(cols.tokens_counted, False)
    ext = take(cols.ext, np.nan)
    return ArmColumns(
        present, ok, take(cols.e2e, np.nan), take(cols.ttft, np.nan),
        np.where(counted, take(cols.output_tokens, np.nan), np.nan),  # characters: NaN
        take(cols.prompt_tokens, np.nan), take(cols.length_stop, False),
        *ext.T,
        {"tokens": counted, "extension": ok & take(cols.has_extension, False),
         "top_logprobs": ok & take(cols.has_top_logprobs, False)},
        take(cols.has_ids, False), take(cols.ids_len, 0),
        take(cols.ids_key, 0), take(cols.text_key, 0), take(itl_start, 0),
        take(cols.itl_len, 0), cols.itl, take(cols.parts, np.nan),
        take(cols.part_keys, 0), src, cols.outputs, cols.token_ids)


def _first_rows(keys: np.ndarray, k: int, preferred: np.ndarray) -> np.ndarray:
    """Per key 0..k-1 (each present), its `preferred` row (at most one per key), else its
    first row."""
    first = np.full(k, len(keys), dtype=np.intp)
    np.minimum.at(first, keys, np.arange(len(keys)))
    rows = np.flatnonzero(preferred)
    first[keys[rows]] = rows
    return first


def align(results: Iterable[ArmResult] | ResultColumns) -> Aligned:
    """Shadow-replay rows (repeat 0 when `ArmResult`s) by request; a duplicate (request, arm) is
    an error. A request's scenario is the baseline's, else its first row's."""
    if not isinstance(results, ResultColumns):
        results = from_results(r for r in results if r.repeat == 0)
    cols = results
    rids, rid_code = cols.codes("request_id")
    arms, arm_code = cols.codes("arm")
    key = rid_code.astype(np.int64) * max(len(arms), 1) + arm_code
    counts = np.bincount(key, minlength=len(rids) * len(arms))
    if (counts > 1).any():  # the first row of the least duplicated key
        dup = int(np.flatnonzero(key == np.flatnonzero(counts > 1)[0])[0])
        raise ValueError(f"duplicate result for request {cols.request_id[dup]!r} on arm "
                         f"{cols.arm[dup]!r}")
    baseline = arm_code == np.searchsorted(arms, BASELINE) if BASELINE in arms else \
        np.zeros(len(cols), dtype=bool)
    pick = _first_rows(rid_code, len(rids), baseline)
    values, codes = cols.codes("scenario")  # values distinct and sorted: codes sort alike
    used, scen_code = unique_codes(codes[pick], len(values))
    names = values[used]
    # by scenario, then request id (rids are sorted already)
    order = np.argsort(scen_code.astype(np.min_scalar_type(len(names))), kind="stable")
    position = np.empty(len(rids), dtype=np.int64)
    position[order] = np.arange(len(rids))
    strata = scen_code[order].astype(np.int64)
    itl_start = cols.gap_starts()
    by_arm = {}
    for a, arm in enumerate(arms):
        rows = np.flatnonzero(arm_code == a)
        src = np.full(len(rids), -1, dtype=np.int64)
        src[position[rid_code[rows]]] = rows
        by_arm[str(arm)] = _arm_columns(cols, src, itl_start)
    return Aligned(tuple(rids[order].tolist()), tuple(names.tolist()), strata, by_arm)


# a figure's `source` when it comes from the answers' per-request numbers (the extension's,
# or the same reported by another server: ArmResult.per_request), not from /metrics scrapes
ANSWERS = "answers"


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
