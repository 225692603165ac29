"""Accumulate an OpenAI streamed answer (SSE chunks) into text, tokens, usage, the
`layergate` extension and per-chunk arrival times; rebuild the non-streamed response.

Shared by the replayer (timings) and the capture proxy (the recorded `response`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

DONE = "[DONE]"


class StreamError(ValueError):
    pass


def sse_payloads(line: str) -> str | None:
    """The payload of one SSE `data:` line, None for other lines (comments, events)."""
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


@dataclass
class StreamAccumulator:
    """Feed decoded chunks in order with the time they arrived (any clock)."""

    text: list[str] = field(default_factory=list)
    token_times: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    extension: dict[str, Any] = field(default_factory=dict)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[dict[str, float]] = field(default_factory=list)
    model: str | None = None
    response_id: str | None = None
    done: bool = False

    def feed_payload(self, payload: str, at: float) -> None:
        if payload == DONE:
            self.done = True
            return
        try:
            chunk = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise StreamError(f"invalid JSON in stream: {payload[:120]!r}") from exc
        self.feed(chunk, at)

    def feed(self, chunk: dict[str, Any], at: float) -> None:
        if not isinstance(chunk, dict):
            raise StreamError(f"stream chunk is not an object: {chunk!r:.120}")
        if "error" in chunk:
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            raise StreamError(f"error in stream: {message}")
        self.model = chunk.get("model", self.model)
        self.response_id = chunk.get("id", self.response_id)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("layergate"), dict):
            self.extension = chunk["layergate"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            if piece:
                self.text.append(piece)
                self.token_times.append(at)
            self._feed_logprobs(choice.get("logprobs"))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def _feed_logprobs(self, lp: Any) -> None:
        if not isinstance(lp, dict):
            return
        if isinstance(lp.get("content"), list):  # chat shape
            for item in lp["content"]:
                self.logprobs.append(item.get("logprob"))
                tops = item.get("top_logprobs") or []
                self.top_logprobs.append({t["token"]: t["logprob"] for t in tops})
        elif isinstance(lp.get("token_logprobs"), list):  # completions shape
            self.logprobs.extend(lp["token_logprobs"])
            self.top_logprobs.extend(t or {} for t in lp.get("top_logprobs") or [])

    @property
    def output_text(self) -> str:
        return "".join(self.text)

    @property
    def token_ids(self) -> tuple[int, ...] | None:
        ids = self.extension.get("token_ids")
        return tuple(ids) if isinstance(ids, list) else None

    @property
    def output_tokens(self) -> int:
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return self.usage["completion_tokens"]
        ids = self.token_ids
        return len(ids) if ids is not None else len(self.text)

    @property
    def prompt_tokens(self) -> int:
        value = (self.usage or {}).get("prompt_tokens")
        return value if isinstance(value, int) else 0

    def to_response(self, endpoint: str) -> dict[str, Any]:
        """The non-streamed response this stream is equivalent to."""
        chat = endpoint.endswith("chat/completions")
        choice: dict[str, Any] = {"index": 0, "finish_reason": self.finish_reason}
        if chat:
            choice["message"] = {"role": "assistant", "content": self.output_text}
        else:
            choice["text"] = self.output_text
        out: dict[str, Any] = {"id": self.response_id,
                               "object": "chat.completion" if chat else "text_completion",
                               "model": self.model, "choices": [choice]}
        if self.usage:
            out["usage"] = self.usage
        if self.extension:
            out["layergate"] = self.extension
        return out
