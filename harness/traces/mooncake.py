"""Mooncake traces (FAST'25 traces of Kimi's serving): JSON lines with `timestamp` (ms),
`input_length`, `output_length` and `hash_ids`, one id per block of `block_size` (512)
prompt tokens; requests that share leading ids share those blocks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import LengthRow
from layergate.harness.traces.source import TraceError, json_lines, seconds, whole

FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def _looks_like(line: str) -> bool:
    return '"hash_ids"' in line and '"input_length"' in line


@trace_format("mooncake", length_only=True, timed=True, time_field="timestamp",
              looks_like=_looks_like,
              summary="JSONL: timestamp (ms), input_length, output_length, hash_ids")
def read(path: Path, context: ReadContext) -> Iterator[LengthRow | TraceError]:
    for line, obj in json_lines(path):
        if isinstance(obj, TraceError):
            yield obj
            continue
        try:
            yield parse(obj, path, line, context.block_size)
        except TraceError as exc:
            yield exc


def parse(obj: dict[str, Any], path: Path, line: int, block_size: int) -> LengthRow:
    for name in FIELDS:
        if name not in obj:
            raise TraceError(path, line, name, "missing")
    at_ms = seconds(obj["timestamp"], path, line, "timestamp")
    n = whole(obj["input_length"], path, line, "input_length", low=1)
    out = whole(obj["output_length"], path, line, "output_length")
    ids = obj["hash_ids"]
    if not isinstance(ids, list):
        raise TraceError(path, line, "hash_ids", f"must be a list of block ids, got "
                                                 f"{type(ids).__name__}")
    for i, h in enumerate(ids):
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h < 1 << 63:
            raise TraceError(path, line, f"hash_ids[{i}]", f"must be an integer >= 0: {h!r}")
    blocks = -(-n // block_size)
    if len(ids) != blocks:
        raise TraceError(path, line, "hash_ids", f"{len(ids)} ids for input_length {n}: "
                         f"blocks of {block_size} tokens need {blocks} (is --block-size "
                         "the trace's?)")
    return LengthRow(line, at_ms / 1000.0, n, out, ids)
