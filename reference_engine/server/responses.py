"""OpenAI response shapes, streamed (chunks) and whole, for chat and text completions.

One `Shaper` per request turns engine events into OpenAI JSON. Both shapes end with `usage`
and the `layergate` extension: in the response, or in the final chunk of a stream.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from layergate.reference_engine.api import FinishEvent, TokenEvent


@dataclass(frozen=True)
class ResponseMeta:
    id: str
    created: int
    model: str

    @classmethod
    def new(cls, prefix: str, model: str) -> ResponseMeta:
        return cls(f"{prefix}-{uuid.uuid4().hex}", int(time.time()), model)


def usage(finish: FinishEvent) -> dict[str, int]:
    return {"prompt_tokens": finish.prompt_tokens,
            "completion_tokens": finish.completion_tokens,
            "total_tokens": finish.prompt_tokens + finish.completion_tokens}


def _top(ev: TokenEvent) -> list[tuple[str, float]]:
    return sorted((ev.top_logprobs or {}).items(), key=lambda kv: -kv[1])


class Shaper:
    """Base: `decode` turns one token id into its text (for logprob entries)."""

    prefix = ""

    def __init__(self, meta: ResponseMeta, decode: Callable[[int], str], logprobs: bool) -> None:
        self.meta = meta
        self.decode = decode
        self.logprobs = logprobs

    def _envelope(self, obj: str, choice: dict[str, Any]) -> dict[str, Any]:
        return {"id": self.meta.id, "object": obj, "created": self.meta.created,
                "model": self.meta.model, "choices": [choice]}

    def _final_extras(self, finish: FinishEvent) -> dict[str, Any]:
        return {"usage": usage(finish), "layergate": finish.extension}


class ChatShaper(Shaper):
    prefix = "chatcmpl"

    def _entry(self, ev: TokenEvent) -> dict[str, Any]:
        token = self.decode(ev.token_id)
        return {"token": token, "logprob": ev.logprob, "bytes": list(token.encode()),
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())}
                                 for t, lp in _top(ev)]}

    def _logprobs(self, events: list[TokenEvent]) -> dict[str, Any] | None:
        return {"content": [self._entry(ev) for ev in events]} if self.logprobs else None

    def first_chunk(self) -> dict[str, Any]:
        return self._envelope("chat.completion.chunk", {
            "index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
            "finish_reason": None})

    def chunk(self, ev: TokenEvent) -> dict[str, Any]:
        return self._envelope("chat.completion.chunk", {
            "index": 0, "delta": {"content": ev.text}, "logprobs": self._logprobs([ev]),
            "finish_reason": None})

    def final_chunk(self, finish: FinishEvent) -> dict[str, Any]:
        body = self._envelope("chat.completion.chunk", {
            "index": 0, "delta": {}, "logprobs": None, "finish_reason": finish.finish_reason})
        return body | self._final_extras(finish)

    def response(self, events: list[TokenEvent], finish: FinishEvent) -> dict[str, Any]:
        body = self._envelope("chat.completion", {
            "index": 0,
            "message": {"role": "assistant", "content": "".join(ev.text for ev in events)},
            "logprobs": self._logprobs(events), "finish_reason": finish.finish_reason})
        return body | self._final_extras(finish)


class CompletionShaper(Shaper):
    prefix = "cmpl"

    def __init__(self, meta: ResponseMeta, decode: Callable[[int], str], logprobs: bool) -> None:
        super().__init__(meta, decode, logprobs)
        self._offset = 0  # text_offset runs on across chunks of one stream

    def _logprobs(self, events: list[TokenEvent]) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        tokens = [self.decode(ev.token_id) for ev in events]
        offsets = []
        for ev in events:
            offsets.append(self._offset)
            self._offset += len(ev.text)
        return {"tokens": tokens, "token_logprobs": [ev.logprob for ev in events],
                "top_logprobs": [dict(_top(ev)) if ev.top_logprobs is not None else None
                                 for ev in events],
                "text_offset": offsets}

    def first_chunk(self) -> None:
        return None  # text completions have no role chunk

    def chunk(self, ev: TokenEvent) -> dict[str, Any]:
        return self._envelope("text_completion", {
            "index": 0, "text": ev.text, "logprobs": self._logprobs([ev]),
            "finish_reason": None})

    def final_chunk(self, finish: FinishEvent) -> dict[str, Any]:
        body = self._envelope("text_completion", {
            "index": 0, "text": "", "logprobs": None, "finish_reason": finish.finish_reason})
        return body | self._final_extras(finish)

    def response(self, events: list[TokenEvent], finish: FinishEvent) -> dict[str, Any]:
        body = self._envelope("text_completion", {
            "index": 0, "text": "".join(ev.text for ev in events),
            "logprobs": self._logprobs(events), "finish_reason": finish.finish_reason})
        return body | self._final_extras(finish)
