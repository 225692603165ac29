"""What a format reader yields for each row of a trace: a length-only request (`LengthRow`,
whose prompt is made up to its length), a turn of a length-only conversation
(`SessionTurn`: its history and its new input made up), a request with its real body
(`RequestRow`), a row
the format itself says to leave out (`Skipped`, e.g. a failed response), or a `TraceError`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LengthRow:
    line: int
    at_s: float  # the trace's timestamp, in seconds
    input_tokens: int
    output_tokens: int
    hash_ids: list[int] | None = None  # mooncake: one id per block of the prompt


@dataclass(frozen=True)
class SessionTurn:
    """A turn of a session (mooncake's multi-turn rows): `input_tokens` new tokens after the
    session's earlier turns, each followed by a made-up reply of its `output_tokens`."""

    line: int
    at_s: float  # when the turn arrives, in trace seconds
    session: str
    input_tokens: int
    output_tokens: int
    hash_ids: list[int] | None = None  # the new input's blocks, when the trace gives them


@dataclass(frozen=True)
class RequestRow:
    line: int
    id: str
    endpoint: str
    body: dict[str, Any]
    response: dict[str, Any] | None = None
    at_s: float | None = None  # None: the format has no timestamps
    # sharegpt: the conversation's messages, so a long one can drop its earliest turns
    messages: list[dict[str, Any]] = field(default_factory=list)
    reference: dict[str, Any] | None = None  # eval layouts: what a right answer is
    # what the import report lists this request under when it is written (names of
    # `report.ImportTally` lists of ids, e.g. "tools_missing")
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    line: int
    why: str  # a key of ImportReport.left_out, e.g. "failed"
