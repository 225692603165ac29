"""Each row's numbers in one fixed-width binary value, written beside the row's columns so
that figures over a million rows read them in bulk (`numpy.frombuffer`) instead of value by
value: column `summary` (the numbers and flags `exporters.columns.ResultColumns` holds, and
the digests of the output) and column `itl_f64` (the inter-token gaps, float64). A row
without them (written by an earlier version) is read from its other columns instead."""

from __future__ import annotations

import json
import struct
from array import array

import numpy as np

from exporters.columns import EXT_KEYS, digest, number
from exporters.records import ArmResult

LAYOUT = np.dtype([("ok", "<f8"), ("e2e", "<f8"), ("ttft", "<f8"), ("output_tokens", "<f8"),
                   ("prompt_tokens", "<f8"), ("length_stop", "<f8"), ("tokens_counted", "<f8"),
                   ("has_extension", "<f8"), ("has_top_logprobs", "<f8"), ("has_ids", "<f8"),
                   ("send_lag", "<f8"), ("ext", "<f8", (len(EXT_KEYS),)), ("ids_len", "<i8"),
                   ("ids_key", "<i8"), ("text_key", "<i8")])


_PACK = struct.Struct(f"<11d{len(EXT_KEYS)}d3q")  # LAYOUT, packed without numpy (µs per row)


def summary(r: ArmResult) -> bytes:
    ext = r.extension if isinstance(r.extension, dict) else {}
    return _PACK.pack(
        r.ok, number(r.e2e_s), number(r.ttft_s), number(r.output_tokens),
        number(r.prompt_tokens or None), r.finish_reason == "length", r.tokens_counted,
        bool(r.extension), bool(r.top_logprobs), r.token_ids is not None, number(r.send_lag_s),
        *(number(ext.get(k)) for k in EXT_KEYS), len(r.token_ids or ()),
        0 if r.token_ids is None else digest(json.dumps(list(r.token_ids))),
        digest(r.output_text))


def gaps(r: ArmResult) -> bytes:
    return array("d", r.itl_s or ()).tobytes()
