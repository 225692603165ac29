"""OpenAI response shapes, streamed (chunks) and whole, for chat and text completions.

One `Shaper` per request turns engine events into OpenAI JSON. Both shapes end with `usage`
and the `layergate` extension: in the response, or in the final chunk of a stream.

A chat request with `tools`, or one whose reasoning is split off, gets its answer's parts
(`answer.py`): `message.reasoning` / `delta.reasoning` (vLLM 0.32's name), `content`, and
`tool_calls` (content null, finish_reason "tool_calls"). Streamed, a tool call is sent once
the output is complete: its first delta has the id, type and name with empty arguments, the
next ones the arguments in fragments; text held back meanwhile keeps its tokens' logprobs,
which go out with the next chunk sent.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from layergate.reference_engine.api import FinishEvent, TokenEvent
from layergate.reference_engine.server.answer import AnswerOptions, AnswerParser
from layergate.reference_engine.server.reasoning import CONTENT, REASONING, Piece
from layergate.reference_engine.server.tool_parser import ParsedCall, argument_fragments


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

    def first_chunk(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def chunk(self, ev: TokenEvent) -> dict[str, Any]:
        raise NotImplementedError

    def final_chunk(self, finish: FinishEvent) -> dict[str, Any]:
        raise NotImplementedError

    def chunks(self, ev: TokenEvent) -> list[dict[str, Any]]:
        """The chunks one token sends: one each, unless its text is held back."""
        return [self.chunk(ev)]

    def final_chunks(self, finish: FinishEvent) -> list[dict[str, Any]]:
        """The chunks that end a stream: what was held back, then the final chunk."""
        return [self.final_chunk(finish)]


class ChatShaper(Shaper):
    prefix = "chatcmpl"

    def __init__(self, meta: ResponseMeta, decode: Callable[[int], str], logprobs: bool,
                 answer: AnswerOptions | None = None) -> None:
        super().__init__(meta, decode, logprobs)
        self.answer = answer or AnswerOptions()
        self._parser = AnswerParser(self.answer) if self.answer.active else None
        self._pending: list[TokenEvent] = []  # tokens whose text is held back
        self._called = False

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
        reason = "tool_calls" if self._called else finish.finish_reason
        body = self._envelope("chat.completion.chunk", {
            "index": 0, "delta": {}, "logprobs": self._held_logprobs(),
            "finish_reason": reason})
        return body | self._final_extras(finish)

    def _delta_chunk(self, delta: dict[str, Any]) -> dict[str, Any]:
        return self._envelope("chat.completion.chunk", {
            "index": 0, "delta": delta, "logprobs": self._held_logprobs(),
            "finish_reason": None})

    def _held_logprobs(self) -> dict[str, Any] | None:
        """The logprobs of the tokens since the last chunk sent (None when there are none)."""
        events, self._pending = self._pending, []
        return self._logprobs(events) if events else None

    def chunks(self, ev: TokenEvent) -> list[dict[str, Any]]:
        if self._parser is None:
            return [self.chunk(ev)]
        self._pending.append(ev)
        pieces = self._parser.feed(ev.text)
        return [self._delta_chunk(_delta(pieces))] if pieces else []

    def final_chunks(self, finish: FinishEvent) -> list[dict[str, Any]]:
        out = []
        if self._parser is not None and finish.finish_reason != "error":
            pieces, calls = self._parser.finish()
            if pieces:
                out.append(self._delta_chunk(_delta(pieces)))
            for index, call in enumerate(calls):
                out.append(self._delta_chunk({"tool_calls": [{
                    "index": index, "id": self.answer.call_id(index), "type": "function",
                    "function": {"name": call.name, "arguments": ""}}]}))
                out.extend(self._delta_chunk({"tool_calls": [{
                    "index": index, "function": {"arguments": fragment}}]})
                    for fragment in argument_fragments(call.arguments))
            self._called = bool(calls)
        return [*out, self.final_chunk(finish)]

    def response(self, events: list[TokenEvent], finish: FinishEvent) -> dict[str, Any]:
        text = "".join(ev.text for ev in events)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        reason = finish.finish_reason
        if self._parser is not None:
            answer = AnswerParser(self.answer).whole(text)
            message["content"] = answer.content
            if self.answer.reasoning is not None:
                message["reasoning"] = answer.reasoning
            if answer.tool_calls:
                message["tool_calls"] = self._tool_calls(answer.tool_calls)
                reason = "tool_calls"
        body = self._envelope("chat.completion", {
            "index": 0, "message": message, "logprobs": self._logprobs(events),
            "finish_reason": reason})
        return body | self._final_extras(finish)

    def _tool_calls(self, calls: list[ParsedCall]) -> list[dict[str, Any]]:
        return [{"id": self.answer.call_id(i), "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for i, call in enumerate(calls)]


def _delta(pieces: list[Piece]) -> dict[str, str]:
    """One delta of reasoning and content pieces (reasoning first, as it came)."""
    delta: dict[str, str] = {}
    for kind in (REASONING, CONTENT):
        text = "".join(t for k, t in pieces if k == kind)
        if text:
            delta[kind] = text
    return delta


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
