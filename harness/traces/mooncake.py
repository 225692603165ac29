"""Mooncake traces (FAST'25 traces of Kimi's serving): JSON lines with `timestamp` (ms),
`input_length`, `output_length` and `hash_ids`, one id per block of `block_size` (512)
prompt tokens; requests that share leading ids share those blocks.

Sessions (the multi-turn rows AIPerf's `mooncake_trace` reads): rows with a `session_id`
are the turns of one conversation, in file order; `input_length` is the turn's new input
(the history is the session's earlier turns and their replies), `hash_ids` optional (the
new input's blocks), `timestamp` (ms) required on a session's first turn, and on a later
turn either `timestamp` or `delay` (ms after the previous turn arrived). Each turn becomes
a chat request holding the session so far (SessionTurn, made up by the pipeline), so the
replay keeps the conversation: in `--conversation-mode own` each arm's history is its own
answers rather than the made-up replies. The rows are sent in time order, sessions
interleaved."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import LengthRow, SessionTurn
from layergate.harness.traces.source import TraceError, json_lines, seconds, whole

FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def _looks_like(line: str) -> bool:
    return ('"hash_ids"' in line or '"session_id"' in line) and '"input_length"' in line


@trace_format("mooncake", length_only=True, timed=True, time_field="timestamp",
              looks_like=_looks_like,
              summary="JSONL: timestamp (ms), input_length, output_length, hash_ids")
def read(path: Path, context: ReadContext
         ) -> Iterator[LengthRow | SessionTurn | TraceError]:
    held: list[LengthRow | SessionTurn] | None = None  # a file of sessions, read whole
    last: dict[str, float] = {}  # session -> its latest turn's arrival (s)
    for line, obj in json_lines(path):
        if isinstance(obj, TraceError):
            yield obj
            continue
        try:
            if isinstance(obj, dict) and "session_id" in obj:
                row = parse_turn(obj, path, line, context.block_size, last)
            else:
                row = parse(obj, path, line, context.block_size)
        except TraceError as exc:
            yield exc
            continue
        if held is None and isinstance(row, SessionTurn):
            held = []
        if held is None:
            yield row  # streamed as written: the pipeline checks the time order
        else:
            held.append(row)
    # a session's turns are written one after the other: sent in time order, interleaved
    yield from sorted(held or (), key=lambda r: r.at_s)


def parse(obj: dict[str, Any], path: Path, line: int, block_size: int) -> LengthRow:
    for name in FIELDS:
        if name not in obj:
            raise TraceError(path, line, name, "missing")
    at_ms = seconds(obj["timestamp"], path, line, "timestamp")
    n = whole(obj["input_length"], path, line, "input_length", low=1)
    out = whole(obj["output_length"], path, line, "output_length")
    ids = obj["hash_ids"]
    _check_blocks(ids, n, block_size, path, line)
    return LengthRow(line, at_ms / 1000.0, n, out, ids)


def parse_turn(obj: dict[str, Any], path: Path, line: int, block_size: int,
               last: dict[str, float]) -> SessionTurn:
    """A session's turn; `last` (session -> its previous turn's arrival) is updated."""
    session = obj["session_id"]
    if isinstance(session, bool) or not isinstance(session, str | int) or session == "":
        raise TraceError(path, line, "session_id", f"must be a non-empty string or an "
                                                   f"integer: {session!r}")
    session = str(session)
    for name in ("input_length", "output_length"):
        if name not in obj:
            raise TraceError(path, line, name, "missing")
    n = whole(obj["input_length"], path, line, "input_length", low=1)
    out = whole(obj["output_length"], path, line, "output_length")
    if "timestamp" in obj:
        at_s = seconds(obj["timestamp"], path, line, "timestamp") / 1000.0
    elif session not in last:
        raise TraceError(path, line, "timestamp", f"missing on the first turn of session "
                                                  f"{session!r} (a later turn may give delay)")
    elif "delay" in obj:
        at_s = last[session] + seconds(obj["delay"], path, line, "delay") / 1000.0
    else:
        raise TraceError(path, line, "delay", "missing: a later turn gives timestamp or delay")
    if session in last and at_s < last[session]:
        raise TraceError(path, line, "timestamp", f"before the previous turn of session "
                                                  f"{session!r}")
    last[session] = at_s
    ids = obj.get("hash_ids")
    if ids is not None:
        _check_blocks(ids, n, block_size, path, line)
    return SessionTurn(line, at_s, session, n, out, ids)


def _check_blocks(ids: Any, n: int, block_size: int, path: Path, line: int) -> None:
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
