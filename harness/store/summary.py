"""Each row's numbers in one fixed-width binary value, written beside the row's columns so
that figures over a million rows read them in bulk (`numpy.frombuffer`) instead of value by
value: column `summary` (the numbers and flags `exporters.figures.columns.ResultColumns` holds, the
digests of the output, and the digests of the row's names: request id, arm, scenario, and
its token source with its quirks, the *tag*) and column `itl_f64` (the inter-token gaps,
float64). Each name is written once, by its digest, into table `result_names`, so a read of
a million rows makes a million Python values, not ten million. A row without them (written
by an earlier version) is read from its other columns instead."""

from __future__ import annotations

import json
import struct
from array import array

import numpy as np

from layergate.exporters.figures.columns import (
    EXT_KEYS,
    PART_DIGESTS,
    PART_KEYS,
    digest,
    number,
    part_row,
)
from layergate.exporters.records import ArmResult

LAYOUT = np.dtype([("ok", "<f8"), ("e2e", "<f8"), ("ttft", "<f8"), ("output_tokens", "<f8"),
                   ("prompt_tokens", "<f8"), ("length_stop", "<f8"), ("tokens_counted", "<f8"),
                   ("has_extension", "<f8"), ("has_top_logprobs", "<f8"), ("has_ids", "<f8"),
                   ("send_lag", "<f8"), ("ext", "<f8", (len(EXT_KEYS),)), ("ids_len", "<i8"),
                   ("ids_key", "<i8"), ("text_key", "<i8"), ("request_key", "<i8"),
                   ("arm_key", "<i8"), ("scenario_key", "<i8"), ("tag_key", "<i8"),
                   ("repeat", "<i8"), ("concurrency", "<i8")])
NAME_KEYS = ("request_key", "arm_key", "scenario_key", "tag_key")  # digests into result_names

NAMES_SCHEMA = ("CREATE TABLE IF NOT EXISTS result_names (key INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL)")
INSERT_NAMES = "INSERT OR IGNORE INTO result_names (key, name) VALUES (?, ?)"

_PACK = struct.Struct(f"<11d{len(EXT_KEYS)}d9q")  # LAYOUT, packed without numpy (µs per row)


def tag(tokens_from: str | None, quirks: tuple[str, ...]) -> str:
    """A row's token source and quirks as one name (what the tallies count by)."""
    return json.dumps([tokens_from, list(quirks)])


def untag(name: str) -> tuple[str | None, tuple[str, ...]]:
    tokens_from, quirks = json.loads(name)
    return tokens_from, tuple(quirks)


def names(r: ArmResult) -> list[tuple[int, str]]:
    """(digest, name) of the row's names, as `result_names` holds them."""
    return [(digest(n), n) for n in (r.request_id, r.arm, r.scenario,
                                     tag(r.tokens_from, tuple(r.quirks)))]


def summary(r: ArmResult, named: list[tuple[int, str]]) -> bytes:
    """The row's LAYOUT; `named` = `names(r)`."""
    return _PACK.pack(
        r.ok, number(r.e2e_s), number(r.ttft_s), number(r.output_tokens),
        number(r.prompt_tokens or None), r.finish_reason == "length", r.tokens_counted,
        bool(r.extension), bool(r.top_logprobs), r.token_ids is not None, number(r.send_lag_s),
        *(number(r.per_request(k)) for k in EXT_KEYS), len(r.token_ids or ()),
        0 if r.token_ids is None else digest(json.dumps(list(r.token_ids))),
        digest(r.answer), *(key for key, _ in named), r.repeat, r.concurrency)


# column `parts`: what the answer held besides its text (columns.PART_KEYS, PART_DIGESTS),
# NULL for a plain answer, so a run of plain answers stores and reads nothing more
PARTS = struct.Struct(f"<{len(PART_KEYS)}d{len(PART_DIGESTS)}q")


def parts(r: ArmResult) -> bytes | None:
    row = part_row(r)
    return None if row is None else PARTS.pack(*row[0], *row[1])


def gaps(r: ArmResult) -> bytes:
    return array("d", r.itl_s or ()).tobytes()
