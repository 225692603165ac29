"""What the HTTP server and the engine say to each other: plain frozen dataclasses.

The server validates and tokenizes; the engine schedules, decodes and reports events
through a callback, from its own thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int = 0  # 0..20

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class GenerationRequest:
    request_id: str
    prompt_token_ids: tuple[int, ...]
    params: SamplingParams
    arrival_time: float  # time.perf_counter() when the server accepted it
    trace_context: Any = None  # an OpenTelemetry context to parent the engine's spans


@dataclass(frozen=True)
class TokenEvent:
    """One generated token. `text` is the detokenized delta (may be "" mid-codepoint);
    stop sequences are already cut out of it."""

    token_id: int
    text: str
    logprob: float | None = None
    top_logprobs: dict[str, float] | None = None


@dataclass(frozen=True)
class FinishEvent:
    """The end of a request: finish_reason is "stop", "length", "cancelled" or "error"."""

    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    extension: dict[str, Any] = field(default_factory=dict)  # the `layergate` object
    error: str | None = None


Event = TokenEvent | FinishEvent
EventSink = Callable[[Event], None]
