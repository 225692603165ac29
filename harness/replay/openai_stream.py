"""The OpenAI streaming protocol as layergate speaks it, without I/O: the request body
(streamed, usage requested), the SSE lines of the answer, the accumulator that turns chunks
into text, timings, usage and the `layergate` extension, and the `ArmResult` a finished or
failed exchange becomes. `client.send` drives it over a transport; the capture proxy uses
the accumulator to rebuild a recorded response.

Shapes handled (real ones in tests/fixtures/streams/): chat and completions chunks from
vLLM, TGI's Messages API, llama.cpp's server and layergate's own engine; a usage chunk with
empty `choices`; `data: [DONE]` or none. What would otherwise give a wrong figure fails the
result and says why: more than one choice, an error object mid-stream, a chunk of an
unexpected shape, an answer that is not a stream, a stream without a finish_reason.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from typing import Any

from exporters.records import ArmResult
from exporters.traffic import TrafficRecord

DONE = "[DONE]"
REQUEST_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


class StreamError(ValueError):
    """An answer that breaks the protocol; the message says how."""


def streaming_body(record: TrafficRecord, model: str | None) -> dict[str, Any]:
    """The record's body, streamed, asking for the usage chunk; `model` replaces its model."""
    body = copy.deepcopy(dict(record.body))
    body["stream"] = True
    body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    if model:
        body["model"] = model
    return body


def encode_body(record: TrafficRecord, model: str | None) -> bytes:
    return json.dumps(streaming_body(record, model)).encode()


def sse_payload(line: str) -> str | None:
    """The payload of one SSE `data:` line, None for other lines (comments, events)."""
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


def error_text(obj: Any) -> str | None:
    """The message of an error object in the shapes servers send — `{"error": {"message"}}`
    (OpenAI, vLLM, llama.cpp, layergate), `{"error": "..."}` (TGI), `{"object": "error",
    "message"}` (older vLLM), `{"detail": ...}` (FastAPI) — or None when `obj` is none."""
    if not isinstance(obj, dict):
        return None
    error = obj.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if error is not None:
        return str(error)
    if obj.get("object") == "error":
        return str(obj.get("message") or obj)
    if "detail" in obj:
        return str(obj["detail"])
    return None


def error_message(raw: bytes, status: int) -> str:
    """`HTTP <status>: <message>` for an error answer, its body's message when it has one."""
    text = raw.decode("utf-8", errors="replace")
    try:
        message = error_text(json.loads(text))
    except ValueError:
        message = None
    return f"HTTP {status}: {message or text[:300]}"


@dataclass
class StreamAccumulator:
    """Feed SSE lines (or decoded chunks) in order, each with the time it arrived (any
    clock). One content chunk may carry several tokens: `chunk_times` are per chunk and
    `output_tokens` comes from usage or token ids before it falls back to counting chunks."""

    text: list[str] = field(default_factory=list)
    chunk_times: list[float] = field(default_factory=list)  # arrival of each content chunk
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    extension: dict[str, Any] = field(default_factory=dict)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[dict[str, float]] = field(default_factory=list)
    model: str | None = None
    response_id: str | None = None
    events: int = 0  # SSE data lines seen, [DONE] included
    done: bool = False  # [DONE] seen

    def feed_line(self, line: str, at: float) -> None:
        payload = sse_payload(line)
        if payload is not None:
            self.feed_payload(payload, at)

    def feed_payload(self, payload: str, at: float) -> None:
        self.events += 1
        if payload == DONE:
            self.done = True
            return
        try:
            chunk = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise StreamError(f"invalid JSON in stream: {payload[:120]!r}") from exc
        self.feed(chunk, at)

    def feed(self, chunk: Any, at: float) -> None:
        if not isinstance(chunk, dict):
            raise StreamError(f"stream chunk is not an object: {chunk!r:.120}")
        message = error_text(chunk)
        if message is not None:
            raise StreamError(f"error in stream: {message}")
        try:
            self._feed(chunk, at)
        except (AttributeError, KeyError, TypeError) as exc:  # a field of another type
            raise StreamError(f"unexpected chunk shape ({type(exc).__name__}: {exc}): "
                              f"{json.dumps(chunk)[:200]}") from exc

    def _feed(self, chunk: dict[str, Any], at: float) -> None:
        self.model = chunk.get("model", self.model)
        self.response_id = chunk.get("id", self.response_id)
        if chunk.get("usage"):  # null on every chunk but the last with TGI and vLLM
            self.usage = chunk["usage"]
        if isinstance(chunk.get("layergate"), dict):
            self.extension = chunk["layergate"]
        for choice in chunk.get("choices") or ():
            self._feed_choice(choice, at)

    def _feed_choice(self, choice: dict[str, Any], at: float) -> None:
        index = choice.get("index", 0)
        if index != 0:
            # usage would count every choice's tokens, and the text would mix answers
            raise StreamError(f"a second choice (index {index}): one choice per request is "
                              "supported (n > 1 is not)")
        delta = choice.get("delta")
        piece = delta.get("content") if isinstance(delta, dict) else choice.get("text")
        if piece:  # a role-only first chunk, or TGI's empty end-of-sequence chunk, is no token
            self.text.append(piece)
            self.chunk_times.append(at)
        self._feed_logprobs(choice.get("logprobs"))
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    def _feed_logprobs(self, lp: Any) -> None:
        if not isinstance(lp, dict):
            return
        if isinstance(lp.get("content"), list):  # chat shape
            for item in lp["content"]:
                self.logprobs.append(item["logprob"])
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
        """From `usage`, else the engine's token ids, else one per content chunk (exact only
        for servers that stream a token per chunk)."""
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


@dataclass(frozen=True)
class ResultBuilder:
    """Turns one exchange — `record` sent to `arm`, meant to go out at `intended` (a
    `time.perf_counter()` value) — into its `ArmResult`. Times count from `intended`."""

    record: TrafficRecord
    arm: str
    intended: float
    repeat: int = 0
    concurrency: int = 1

    def _common(self) -> dict[str, Any]:
        return dict(request_id=self.record.id, arm=self.arm, scenario=self.record.scenario,
                    max_tokens=self.record.max_tokens, repeat=self.repeat,
                    concurrency=self.concurrency)

    def failure(self, error: str, status: int | None = None,
                acc: StreamAccumulator | None = None) -> ArmResult:
        return ArmResult(ok=False, error=error, http_status=status,
                         e2e_s=time.perf_counter() - self.intended,
                         output_text=acc.output_text if acc else "", **self._common())

    def finished(self, status: int, acc: StreamAccumulator, e2e: float) -> ArmResult:
        """The result of a stream read to its end (`e2e` after the intended send): a
        failure when it was no stream, or never said why it ended."""
        if acc.events == 0:
            return self.failure("the answer held no SSE `data:` line (did the server "
                                "ignore `stream: true`?)", status, acc)
        if acc.finish_reason is None:
            closed = "" if acc.done else " (and no [DONE]: the connection closed early)"
            return self.failure(f"stream ended without a finish_reason{closed}", status, acc)
        times = acc.chunk_times
        return ArmResult(
            ok=True, http_status=status, ttft_s=times[0] if times else e2e, e2e_s=e2e,
            itl_s=tuple(b - a for a, b in zip(times, times[1:], strict=False)),
            output_text=acc.output_text, output_tokens=acc.output_tokens,
            prompt_tokens=acc.prompt_tokens, finish_reason=acc.finish_reason,
            token_ids=acc.token_ids, logprobs=tuple(acc.logprobs) if acc.logprobs else None,
            top_logprobs=tuple(acc.top_logprobs) if acc.top_logprobs else None,
            extension=acc.extension, **self._common())
