"""A run's shadow-replay results as columns: one row per (request, arm), the numbers as numpy
arrays, each output by a digest, the outputs themselves fetched only for the rows that
need them. `layergate.exporters.figures.aligned` lays these out per arm.

Built from `ArmResult`s here (`from_results`) or read from a run's store
(`layergate.harness.store.scan`), with the same values either way, so a million results need no
million objects. A digest is 8 bytes of BLAKE2b of the text (of the token ids: their JSON,
as the store writes it), the same in every process: equal outputs have equal digests;
unequal ones collide with probability 2^-64 per pair, far below any figure's resolution.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from layergate.exporters.answer_checks import structured_key
from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import ToolCall, canonical_calls

# the per-request numbers the calculators read (the `layergate` extension's, or the same
# reported by another server: ArmResult.per_request), in `ResultColumns.ext` order
EXT_KEYS = ("theoretical_saving", "computed_tokens", "peak_memory_bytes",
            "prefix_cache_hit_tokens", "prefix_cache_query_tokens", "draft_tokens_proposed",
            "draft_tokens_accepted", "draft_steps")

# what an answer held besides its text (ArmResult's tool calls, reasoning, answer time and
# schema checks), as numbers in `ResultColumns.parts` (this order; `part_row` makes them):
# how many tool calls, whether they met the request's schemas (NaN: not asked, or no call),
# whether the content met its response_format (NaN: not asked), the reasoning's tokens
# (NaN: not counted) and characters, the time to the first answer token
PART_KEYS = ("tool_calls", "tool_calls_valid", "structured_valid", "reasoning_tokens",
             "reasoning_chars", "answer_ttft")
# and as digests in `ResultColumns.part_keys`: the calls compared as JSON (0: none), the
# content's JSON value (0: not asked for, or no JSON)
PART_DIGESTS = ("calls_key", "structured_key")


def part_row(r: ArmResult) -> tuple[list[float], list[int]] | None:
    """A result's PART_KEYS and PART_DIGESTS; None when it held nothing besides its text
    (a plain answer: no calls, no reasoning, no check, the answer's first token its first),
    whose parts are the defaults (`default_parts`)."""
    plain = (not r.tool_calls and not r.reasoning_text and not r.reasoning_tokens
             and not r.schema_valid and r.answer_ttft_s in (None, r.ttft_s))
    if plain:
        return None
    valid = r.schema_valid
    structured = None
    if "structured" in valid:
        structured = structured_key(r.output_text)
    return ([float(len(r.tool_calls)), _flag(valid.get("tool_calls")),
             _flag(valid.get("structured")), number(r.reasoning_tokens),
             float(len(r.reasoning_text)), number(r.answer_ttft_s if r.answer_ttft_s
                                                  is not None else r.ttft_s)],
            [digest(canonical_calls(r.tool_calls)) if r.tool_calls else 0,
             0 if structured is None else digest(structured)])


def _flag(value: object) -> float:
    """A check's outcome as 1.0 / 0.0; NaN: not checked."""
    return float(value) if isinstance(value, bool) else np.nan


def default_parts(ttft: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The parts of plain answers: no calls, nothing checked, no reasoning, the answer's
    first token the first token."""
    parts = np.zeros((len(ttft), len(PART_KEYS)))
    parts[:, 1:3] = np.nan
    parts[:, 5] = ttft
    return parts, np.zeros((len(ttft), len(PART_DIGESTS)), dtype=np.int64)


class Output(NamedTuple):
    """What calculators read of an answer's output (an `ArmResult` carries the same)."""

    output_text: str
    token_ids: Sequence[int] | None
    top_logprobs: Sequence[dict[str, float]] | None
    answer: str  # the answer as one text, reasoning apart (records.answer_text)
    tool_calls: tuple[ToolCall, ...]


# row indices -> those rows' outputs (`Output`s, or the results themselves)
Outputs = Callable[[np.ndarray], Sequence[Output | ArmResult]]
# row indices (rows with token ids) -> their token ids end to end, and how many each row has
TokenIds = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def flat_token_ids(outputs: Sequence[Output | ArmResult]) -> tuple[np.ndarray, np.ndarray]:
    """The outputs' token ids end to end, and how many each has (TokenIds from outputs)."""
    lengths = np.array([len(o.token_ids or ()) for o in outputs], dtype=np.int64)
    flat = np.fromiter((t for o in outputs for t in o.token_ids or ()), dtype=np.int64,
                       count=int(lengths.sum()))
    return flat, lengths


@dataclass(frozen=True)
class Factorised:
    """A string column as its distinct values, sorted, and each row's index into them:
    what `align` would find by sorting a million strings, found once by the reader that
    knew it (the store, from its names)."""

    values: np.ndarray  # str, distinct, sorted
    codes: np.ndarray  # int, one per row

    def take(self, idx: np.ndarray) -> Factorised:
        return Factorised(self.values, self.codes[idx])


@dataclass(frozen=True)
class ResultColumns:
    """One row per result; NaN where a number is absent."""

    request_id: np.ndarray  # str
    arm: np.ndarray  # str
    scenario: np.ndarray  # str
    ok: np.ndarray  # bool
    e2e: np.ndarray
    ttft: np.ndarray
    output_tokens: np.ndarray  # float, as reported (a count of characters included)
    prompt_tokens: np.ndarray  # NaN when 0 or not reported
    length_stop: np.ndarray  # bool: finish_reason == "length"
    tokens_counted: np.ndarray  # bool: output_tokens counts tokens (ArmResult.tokens_counted)
    send_lag: np.ndarray  # s the request went out behind its intended time (NaN: unknown)
    ext: np.ndarray  # (n, len(EXT_KEYS)) the per-request numbers (ArmResult.per_request)
    has_extension: np.ndarray  # bool: a non-empty extension
    has_top_logprobs: np.ndarray  # bool
    has_ids: np.ndarray  # bool: token ids returned
    ids_len: np.ndarray  # int: how many token ids
    ids_key: np.ndarray  # int64 digest of the token ids (0 without)
    text_key: np.ndarray  # int64 digest of the answer (ArmResult.answer_key: text, calls)
    itl: np.ndarray  # every row's inter-token gaps, concatenated in row order
    itl_len: np.ndarray  # int: gaps per row
    parts: np.ndarray  # (n, len(PART_KEYS)) what the answer held besides its text
    part_keys: np.ndarray  # (n, len(PART_DIGESTS)) int64 digests of its calls and JSON
    outputs: Outputs
    # string columns (request_id, arm, scenario) the reader factorised; absent: not known
    factorised: Mapping[str, Factorised] = field(default_factory=dict)
    # the rows' token ids read in bulk, where the reader can (None: from `outputs`)
    token_ids: TokenIds | None = None
    # where each row's gaps start in `itl`, when the reader put the rows in another order
    # than their gaps (None: the gaps end to end in row order)
    itl_start: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ok)

    def gap_starts(self) -> np.ndarray:
        """Where each row's gaps start in `itl`."""
        if self.itl_start is not None:
            return self.itl_start
        return np.cumsum(self.itl_len) - self.itl_len

    def codes(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(the distinct values of string column `name`, sorted; each row's index into
        them), as numpy.unique gives them."""
        known = self.factorised.get(name)
        if known is None:
            return np.unique(getattr(self, name).astype(str), return_inverse=True)
        used, codes = unique_codes(known.codes, len(known.values))
        return known.values[used], codes


def unique_codes(codes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy.unique(codes, return_inverse=True) of codes in 0..k-1, counted, not sorted: a
    million rows in milliseconds, the same arrays (the inverse as intp)."""
    if not len(codes):
        return np.zeros(0, dtype=codes.dtype), np.zeros(0, dtype=np.intp)
    seen = np.bincount(codes, minlength=k) > 0
    used = np.flatnonzero(seen).astype(codes.dtype)
    if len(used) == k:  # every value used: the codes are their own inverse
        return used, codes.astype(np.intp, copy=False)
    rank = np.cumsum(seen) - 1
    return used, rank[codes].astype(np.intp, copy=False)


# the fields holding a value per row (the rest say how to read more of the rows)
ROW_FIELDS = tuple(f for f in ResultColumns.__dataclass_fields__
                   if f not in ("outputs", "factorised", "token_ids", "itl_start"))


def number(value: object) -> float:
    """A JSON number as float; anything else (a bool, a string, None) NaN."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else np.nan


def digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little",
                          signed=True)


def ids_digest(token_ids: Sequence[int] | None) -> int:
    """The digest of token ids, equal to the one of their stored JSON."""
    return 0 if token_ids is None else digest(json.dumps(list(token_ids)))


def from_results(results: Iterable[ArmResult]) -> ResultColumns:
    rows = list(results)
    gaps = [r.itl_s or () for r in rows]
    return ResultColumns(
        request_id=np.array([r.request_id for r in rows], dtype=object),
        arm=np.array([r.arm for r in rows], dtype=object),
        scenario=np.array([r.scenario for r in rows], dtype=object),
        ok=np.array([r.ok for r in rows], dtype=bool),
        e2e=np.array([number(r.e2e_s) for r in rows], dtype=float),
        ttft=np.array([number(r.ttft_s) for r in rows], dtype=float),
        output_tokens=np.array([number(r.output_tokens) for r in rows], dtype=float),
        prompt_tokens=np.array([number(r.prompt_tokens or None) for r in rows], dtype=float),
        length_stop=np.array([r.finish_reason == "length" for r in rows], dtype=bool),
        tokens_counted=np.array([r.tokens_counted for r in rows], dtype=bool),
        send_lag=np.array([number(r.send_lag_s) for r in rows], dtype=float),
        ext=np.array([[number(r.per_request(k)) for k in EXT_KEYS] for r in rows],
                     dtype=float).reshape(len(rows), len(EXT_KEYS)),
        has_extension=np.array([bool(r.extension) for r in rows], dtype=bool),
        has_top_logprobs=np.array([bool(r.top_logprobs) for r in rows], dtype=bool),
        has_ids=np.array([r.token_ids is not None for r in rows], dtype=bool),
        ids_len=np.array([len(r.token_ids or ()) for r in rows], dtype=np.int64),
        ids_key=np.array([ids_digest(r.token_ids) for r in rows], dtype=np.int64),
        text_key=np.array([digest(r.answer) for r in rows], dtype=np.int64),
        itl=np.fromiter((g for gs in gaps for g in gs), dtype=float),
        itl_len=np.array([len(g) for g in gaps], dtype=np.int64),
        **_parts(rows),
        outputs=lambda idx: [rows[i] for i in idx],
    )


def _parts(rows: Sequence[ArmResult]) -> dict[str, np.ndarray]:
    parts, keys = default_parts(np.array([number(r.ttft_s) for r in rows], dtype=float))
    for i, r in enumerate(rows):
        row = part_row(r)
        if row is not None:
            parts[i], keys[i] = row
    return {"parts": parts, "part_keys": keys}


def select(cols: ResultColumns, keep: np.ndarray, arm: np.ndarray) -> ResultColumns:
    """The rows where `keep` is true, on the arms `arm` (one per kept row): a run seen with
    some arms left out and others renamed."""
    idx = np.flatnonzero(keep)
    lens = cols.itl_len[idx]
    names = [f for f in ROW_FIELDS if f not in ("itl", "itl_len", "arm")]
    ids = cols.token_ids
    return ResultColumns(**{f: getattr(cols, f)[idx] for f in names}, arm=arm,
                         itl=cols.itl[gap_index(cols.gap_starts()[idx], lens)], itl_len=lens,
                         outputs=lambda rows: cols.outputs(idx[np.asarray(rows, dtype=np.int64)]),
                         factorised={k: f.take(idx) for k, f in cols.factorised.items()
                                     if k != "arm"},
                         token_ids=None if ids is None else lambda rows: ids(
                             idx[np.asarray(rows, dtype=np.int64)]))


def gap_index(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Where the gaps of rows starting at `starts`, `lens` each, lie in `itl`, end to end:
    each row's start plus 0 .. len - 1."""
    return np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))


def concat(parts: Sequence[ResultColumns]) -> ResultColumns:
    """The rows of several column sets, in order (e.g. the store's and the recorded ones)."""
    parts = [p for p in parts if len(p)] or list(parts[:1])
    if len(parts) == 1:
        return parts[0]
    starts = np.cumsum([0, *(len(p) for p in parts)])

    def outputs(idx: np.ndarray) -> list[Output | ArmResult]:
        idx = np.asarray(idx, dtype=np.int64)
        which = np.searchsorted(starts, idx, side="right") - 1
        out: list[Output | ArmResult | None] = [None] * len(idx)
        for k, part in enumerate(parts):
            pos = np.flatnonzero(which == k)
            for j, got in zip(pos, part.outputs(idx[pos] - starts[k]), strict=True):
                out[j] = got
        return out  # type: ignore[return-value]

    ordered = any(p.itl_start is not None for p in parts)  # else: end to end, as they are
    shift = np.cumsum([0, *(len(p.itl) for p in parts)])
    return ResultColumns(**{f: np.concatenate([getattr(p, f) for p in parts])
                            for f in ROW_FIELDS},
                         outputs=outputs, itl_start=np.concatenate([
                             p.gap_starts() + at for p, at in zip(parts, shift[:-1], strict=True)])
                         if ordered else None)
