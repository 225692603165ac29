"""The OpenAI streaming protocol as layergate speaks it, without I/O: the request body
(streamed, usage requested), the SSE lines of the answer, the accumulator that turns chunks
into text, timings, usage and the `layergate` extension, and the `ArmResult` a finished or
failed exchange becomes. The replay's `client.send` drives it over a transport; the capture
proxy uses the accumulator to rebuild a recorded response, so it sits beside both.

Shapes handled (tests/fixtures/streams/): chat and completions chunks from vLLM, TGI's
Messages API, SGLang, llama.cpp's servers and layergate's own engine; a usage chunk with
empty `choices`; `data: [DONE]` or none. What would otherwise give a wrong figure fails the
result and says why: more than one choice, an error object mid-stream, a chunk of an
unexpected shape, an answer that is not a stream, a stream without a finish_reason. How a
server departed from the protocol is recorded on the result (`quirks`, catalogue.QUIRKS).

Per-request numbers an answer reports outside the `layergate` extension are read into
`ArmResult.reported` under the extension's names (`reported_numbers`): the prompt tokens a
prefix cache served (`usage.prompt_tokens_details.cached_tokens`, OpenAI's field), vLLM's
per-request speculative metrics (`metrics.speculative_decoding`) and SGLang's
(`sglext.spec_tokens_details`).

Output tokens are counted from the best source the answer allows (catalogue.TOKEN_SOURCES):
usage, the engine's token ids, one logprobs entry per token, the named tokenizer on the
text, or — flagged as such — the text's characters. Never from the chunks: one chunk may
carry several tokens (speculative decoding).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any

from layergate.exporters import answer_checks, tokenizer
from layergate.exporters.catalogue import (
    CHARACTERS,
    CLOSED_EARLY,
    ERROR_IN_STREAM,
    LOGPROBS,
    NO_DONE,
    NO_LOGPROBS,
    NO_USAGE,
    NOT_A_STREAM,
    SEVERAL_CHOICES,
    SEVERAL_TOKENS_PER_CHUNK,
    TOKEN_IDS,
    TOKENIZER,
    TOOL_ARGUMENTS_UNPARSED,
    TOOL_CALL_MALFORMED,
    TOOL_CALL_ORDER,
    USAGE,
)
from layergate.exporters.errors import InfrastructureError
from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import CallsBuilder, ToolCall
from layergate.exporters.traffic import TrafficRecord

DONE = "[DONE]"
# json.loads, less its checks for bytes and a BOM (a BOM fails to decode all the same): the
# stream's every chunk goes through it
_DECODE = json.JSONDecoder().decode
REQUEST_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


# vLLM's per-request speculative metrics (entrypoints/generate/base/protocol.py,
# SpeculativeDecodingMetrics) -> the extension's names (docs/CONTRACTS.md)
SPECULATIVE_NUMBERS = {"num_draft_tokens": "draft_tokens_proposed",
                       "num_accepted_draft_tokens": "draft_tokens_accepted",
                       "num_spec_steps": "draft_steps"}
# SGLang's (entrypoints/openai/protocol.py, SpecTokensDetails in the response's `sglext`,
# sent when the request asks `return_spec_tokens_details`): verify calls are its drafts
SGLANG_SPECULATIVE_NUMBERS = {"spec_num_proposed_drafts": "draft_tokens_proposed",
                              "spec_num_correct_drafts": "draft_tokens_accepted",
                              "spec_verify_ct": "draft_steps"}


def reported_numbers(usage: dict[str, Any] | None, metrics: dict[str, Any] | None,
                     sglext: dict[str, Any] | None = None) -> dict[str, int]:
    """What an answer reports per request outside the extension, under the extension's
    names: the prefix cache's hit and query tokens from its usage's cached tokens, and
    the speculative counts from vLLM's `metrics` or SGLang's `sglext`. A field missing or
    not an integer is left out, never read as 0."""
    out: dict[str, int] = {}
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    prompt = usage.get("prompt_tokens")
    if _count(cached) and _count(prompt):
        out |= {"prefix_cache_hit_tokens": cached, "prefix_cache_query_tokens": prompt}
    # SGLang's details are a list only for n > 1, which a result refuses
    for block, key, names in ((metrics, "speculative_decoding", SPECULATIVE_NUMBERS),
                              (sglext, "spec_tokens_details", SGLANG_SPECULATIVE_NUMBERS)):
        spec = block.get(key) if isinstance(block, dict) else None
        if isinstance(spec, dict):
            out |= {ours: spec[theirs] for theirs, ours in names.items()
                    if _count(spec.get(theirs))}
    return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def reasoning_count(acc: StreamAccumulator, tokenizer_path: str | None) -> int | None:
    """The answer's reasoning tokens: the usage's count, else the named tokenizer's on the
    reasoning text; 0 when it sent no reasoning; None when nothing counts it (its text is
    kept all the same, and the figures compare characters then)."""
    counted = acc.reasoning_tokens
    if not acc.reasoning:
        return counted if counted is not None else 0 if acc.events else None
    if counted:  # vLLM's granite parser reports 0 beside the reasoning it streamed
        return counted
    return tokenizer.count(tokenizer_path, acc.reasoning_text) if tokenizer_path else None


class StreamError(InfrastructureError, ValueError):
    """An answer that breaks the protocol; the message says how, `quirk` names it."""

    def __init__(self, message: str, quirk: str | None = None) -> None:
        super().__init__(message)
        self.quirk = quirk


@dataclass(frozen=True)
class BodyShape:
    """What layergate adds to a record's body: `stream: true` always; with `extras` the
    usage chunk (stream_options.include_usage) and, with `top_logprobs` K > 0, the top-K
    logprobs of every token (unless the record asks for logprobs itself)."""

    model: str | None = None
    top_logprobs: int = 0
    extras: bool = True


def asks_logprobs(body: dict[str, Any]) -> bool:
    return bool(body.get("logprobs")) or bool(body.get("top_logprobs"))


def streaming_body(record: TrafficRecord, shape: BodyShape = BodyShape()) -> dict[str, Any]:
    """The record's body, streamed, with what `shape` adds; its model replaced by
    `shape.model` when given. The record is not changed: only top-level keys are set, so the
    copy is shallow (its nested values are the record's: read them, never change them; a
    deep copy per request cost more than parsing its answer, profiled)."""
    body = dict(record.body)
    body["stream"] = True
    if shape.model:
        body["model"] = shape.model
    if not shape.extras:
        return body
    body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    if shape.top_logprobs > 0 and not asks_logprobs(record.body):
        if record.endpoint.endswith("chat/completions"):
            body |= {"logprobs": True, "top_logprobs": shape.top_logprobs}
        else:
            body["logprobs"] = shape.top_logprobs
    return body


def added_fields(record: TrafficRecord, shape: BodyShape) -> tuple[str, ...]:
    """The top-level fields the extras of `shape` add to (or change in) the record's body."""
    full = streaming_body(record, shape)
    plain = streaming_body(record, dataclasses.replace(shape, extras=False))
    return tuple(sorted(key for key, value in full.items()
                        if key not in plain or plain[key] != value))


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
    clock). One content chunk may carry several tokens: `chunk_times` are per chunk, and
    `token_count` never counts chunks."""

    text: list[str] = field(default_factory=list)
    # arrival of each chunk that carried generated text of any kind: content, reasoning, a
    # tool call's name or arguments, a refusal (TTFT and ITL count every generated token)
    chunk_times: list[float] = field(default_factory=list)
    answer_at: float | None = None  # the first content, tool-call or refusal piece
    reasoning: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: CallsBuilder = field(default_factory=CallsBuilder)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None  # vLLM's per-request metrics (final usage chunk)
    sglext: dict[str, Any] | None = None  # SGLang's extension (a chunk before the usage)
    extension: dict[str, Any] = field(default_factory=dict)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[dict[str, float]] = field(default_factory=list)
    model: str | None = None
    response_id: str | None = None
    events: int = 0  # SSE data lines seen, [DONE] included
    done: bool = False  # [DONE] seen

    def feed_line(self, line: str, at: float) -> None:
        if line.startswith("data:"):  # the payload of an SSE `data:` line; others carry none
            self.feed_payload(line[5:].strip(), at)

    def feed_payload(self, payload: str, at: float) -> None:
        self.events += 1
        if payload == DONE:
            self.done = True
            return
        try:
            chunk = _DECODE(payload)
        except json.JSONDecodeError as exc:
            raise StreamError(f"invalid JSON in stream: {payload[:120]!r}") from exc
        self.feed(chunk, at)

    def feed(self, chunk: Any, at: float) -> None:
        if not isinstance(chunk, dict):
            raise StreamError(f"stream chunk is not an object: {chunk!r:.120}")
        # only a chunk with one of error_text's keys can be an error (checked per chunk)
        if "error" in chunk or "detail" in chunk or chunk.get("object") == "error":
            message = error_text(chunk)
            if message is not None:
                raise StreamError(f"error in stream: {message}", ERROR_IN_STREAM)
        try:
            self._feed(chunk, at)
        except (AttributeError, KeyError, TypeError) as exc:  # a field of another type
            raise StreamError(f"unexpected chunk shape ({type(exc).__name__}: {exc}): "
                              f"{json.dumps(chunk)[:200]}") from exc

    def _feed(self, chunk: dict[str, Any], at: float) -> None:
        get = chunk.get
        self.model = get("model", self.model)
        self.response_id = get("id", self.response_id)
        if get("usage"):  # null on every chunk but the last with TGI and vLLM
            self.usage = chunk["usage"]
        if isinstance(get("metrics"), dict):  # vLLM: beside the usage, when enabled
            self.metrics = chunk["metrics"]
        if isinstance(get("sglext"), dict):  # SGLang: its own chunk, when asked
            self.sglext = chunk["sglext"]
        extension = get("layergate")
        if isinstance(extension, dict):
            self.extension = extension
        for choice in get("choices") or ():
            self._feed_choice(choice, at)

    def _feed_choice(self, choice: dict[str, Any], at: float) -> None:
        get = choice.get
        index = get("index", 0)
        if index != 0:
            # usage would count every choice's tokens, and the text would mix answers
            raise StreamError(f"a second choice (index {index}): one choice per request is "
                              "supported (n > 1 is not)", SEVERAL_CHOICES)
        delta = get("delta")
        if isinstance(delta, dict):
            self._feed_delta(delta, at)
        else:
            piece = get("text")  # completions
            if piece:
                self.text.append(piece)
                self._generated(at, answer=True)
        lp = get("logprobs")
        if lp is not None:
            self._feed_logprobs(lp)
        finish = get("finish_reason")
        if finish:
            self.finish_reason = finish

    def _feed_delta(self, delta: dict[str, Any], at: float) -> None:
        """One chat delta (or a non-streamed message): its content, reasoning (vLLM names
        it `reasoning`, SGLang, llama.cpp and DeepSeek `reasoning_content`), refusal and
        tool calls. A role-only first chunk, or TGI's empty end-of-sequence one, is no
        token."""
        get = delta.get
        answer = False
        for key, into in (("content", self.text), ("refusal", self.refusal)):
            piece = get(key)
            if isinstance(piece, str) and piece:
                into.append(piece)
                answer = True
        if get("tool_calls") is not None:
            answer |= self.calls.feed(get("tool_calls"), TOOL_CALL_MALFORMED, TOOL_CALL_ORDER)
        elif get("function_call") is not None:
            # the legacy field alone; llama-cpp-python copies each tool-call delta into it
            # as well, and reading both would double the arguments
            answer |= self.calls.feed_function_call(get("function_call"), TOOL_CALL_MALFORMED)
        thought = False
        for key in ("reasoning", "reasoning_content"):
            piece = get(key)
            if isinstance(piece, str) and piece:
                self.reasoning.append(piece)
                thought = True
                break  # a server sending both names sends the same text twice
        if answer or thought:
            self._generated(at, answer)

    def _generated(self, at: float, answer: bool) -> None:
        self.chunk_times.append(at)
        if answer and self.answer_at is None:
            self.answer_at = at

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

    def feed_response(self, response: Any, at: float) -> None:
        """A non-streamed answer (`choices[].message`), read as one chunk whose delta is
        the message: the same fields, the same checks."""
        if not isinstance(response, dict):
            raise StreamError(f"answer is not an object: {response!r:.120}")
        choices = []
        for choice in response.get("choices") or ():
            message = choice.get("message") if isinstance(choice, dict) else None
            if isinstance(message, dict) and isinstance(message.get("tool_calls"), list):
                message = {**message, "tool_calls": [
                    {**c, "index": c.get("index", i)} if isinstance(c, dict) else c
                    for i, c in enumerate(message["tool_calls"])]}
            choices.append({**choice, "delta": message} if isinstance(message, dict)
                           else choice)
        self.events += 1
        self.feed({**response, "choices": choices}, at)
        self.done = True

    @property
    def output_text(self) -> str:
        return "".join(self.text)

    @property
    def generated_text(self) -> str:
        """Every generated piece as text (reasoning, content, refusal, the calls' names and
        arguments): what a tokenizer counts when the answer gives no count."""
        calls = "".join(f"{c.name or ''}{c.arguments}" for c in self.tool_calls)
        return self.reasoning_text + self.output_text + "".join(self.refusal) + calls

    @property
    def reasoning_text(self) -> str:
        return "".join(self.reasoning)

    @property
    def refusal_text(self) -> str | None:
        return "".join(self.refusal) or None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return self.calls.calls(TOOL_ARGUMENTS_UNPARSED)

    @property
    def reasoning_tokens(self) -> int | None:
        """The usage's `completion_tokens_details.reasoning_tokens` (OpenAI's field), when
        it says (None: it does not)."""
        details = (self.usage or {}).get("completion_tokens_details")
        value = details.get("reasoning_tokens") if isinstance(details, dict) else None
        return value if _count(value) else None

    @property
    def token_ids(self) -> tuple[int, ...] | None:
        ids = self.extension.get("token_ids")
        return tuple(ids) if isinstance(ids, list) else None

    def token_count(self, tokenizer_path: str | None = None) -> tuple[int, str]:
        """(output tokens, where the count came from): usage, else the engine's token ids,
        else one logprobs entry per token, else `tokenizer_path` on the text, else the
        text's characters (catalogue.TOKEN_SOURCES)."""
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return self.usage["completion_tokens"], USAGE
        ids = self.token_ids
        if ids is not None:
            return len(ids), TOKEN_IDS
        if self.logprobs:
            return len(self.logprobs), LOGPROBS
        if tokenizer_path:
            return tokenizer.count(tokenizer_path, self.generated_text), TOKENIZER
        return len(self.generated_text), CHARACTERS

    @property
    def output_tokens(self) -> int:
        return self.token_count()[0]

    @property
    def prompt_tokens(self) -> int:
        value = (self.usage or {}).get("prompt_tokens")
        return value if isinstance(value, int) else 0

    def to_response(self, endpoint: str) -> dict[str, Any]:
        """The non-streamed response this stream is equivalent to."""
        chat = endpoint.endswith("chat/completions")
        choice: dict[str, Any] = {"index": 0, "finish_reason": self.finish_reason}
        if chat:
            calls = self.tool_calls
            message: dict[str, Any] = {"role": "assistant",
                                       "content": self.output_text or (None if calls
                                                                        else "")}
            if calls:
                message["tool_calls"] = [c.to_wire() for c in calls]
            if self.reasoning:
                message["reasoning"] = self.reasoning_text
            if self.refusal:
                message["refusal"] = self.refusal_text
            choice["message"] = message
        else:
            choice["text"] = self.output_text
        out: dict[str, Any] = {"id": self.response_id,
                               "object": "chat.completion" if chat else "text_completion",
                               "model": self.model, "choices": [choice]}
        if self.usage:
            out["usage"] = self.usage
        if self.metrics:
            out["metrics"] = self.metrics
        if self.sglext:
            out["sglext"] = self.sglext
        if self.extension:
            out["layergate"] = self.extension
        return out


@dataclass(frozen=True)
class ResultBuilder:
    """Turns one exchange — `record` sent to `arm`, meant to go out at `intended` (a
    `time.perf_counter()` value) — into its `ArmResult`. Times count from `intended`.
    `body` is what was sent (to tell what was asked for), `tokenizer` the tokenizer.json
    that counts tokens when the answer gives no count, `quirks` what the exchange met
    before the answer (e.g. a refused first attempt), `send_lag_s` how late it went out."""

    record: TrafficRecord
    arm: str
    intended: float
    repeat: int = 0
    concurrency: int = 1
    body: dict[str, Any] | None = None
    tokenizer: str | None = None
    quirks: tuple[str, ...] = ()
    send_lag_s: float | None = None

    def _common(self) -> dict[str, Any]:
        return dict(request_id=self.record.id, arm=self.arm, scenario=self.record.scenario,
                    max_tokens=self.record.max_tokens, repeat=self.repeat,
                    concurrency=self.concurrency, send_lag_s=self.send_lag_s)

    def failure(self, error: str, status: int | None = None,
                acc: StreamAccumulator | None = None, quirk: str | None = None) -> ArmResult:
        quirks = self.quirks + ((quirk,) if quirk else ())
        return ArmResult(ok=False, error=error, http_status=status,
                         e2e_s=time.perf_counter() - self.intended,
                         output_text=acc.output_text if acc else "", quirks=quirks,
                         **self._common())

    def finished(self, status: int, acc: StreamAccumulator, e2e: float) -> ArmResult:
        """The result of a stream read to its end (`e2e` after the intended send): a
        failure when it was no stream, or never said why it ended."""
        if acc.events == 0:
            return self.failure("the answer held no SSE `data:` line (did the server "
                                "ignore `stream: true`?)", status, acc, NOT_A_STREAM)
        if acc.finish_reason is None:
            if acc.done:
                return self.failure("stream ended without a finish_reason", status, acc)
            return self.failure("stream ended without a finish_reason (and no [DONE]: the "
                                "connection closed early)", status, acc, CLOSED_EARLY)
        tokens, source = acc.token_count(self.tokenizer)
        times = acc.chunk_times
        calls = acc.tool_calls
        return ArmResult(
            ok=True, http_status=status, ttft_s=times[0] if times else e2e, e2e_s=e2e,
            answer_ttft_s=acc.answer_at if acc.answer_at is not None else e2e,
            tool_calls=calls, reasoning_text=acc.reasoning_text,
            reasoning_tokens=reasoning_count(acc, self.tokenizer), refusal=acc.refusal_text,
            schema_valid=answer_checks.checks(self.body or self.record.body, calls,
                                              acc.output_text),
            itl_s=tuple(b - a for a, b in zip(times, times[1:], strict=False)),
            output_text=acc.output_text, output_tokens=tokens, tokens_from=source,
            prompt_tokens=acc.prompt_tokens, finish_reason=acc.finish_reason,
            token_ids=acc.token_ids, logprobs=tuple(acc.logprobs) if acc.logprobs else None,
            top_logprobs=tuple(acc.top_logprobs) if acc.top_logprobs else None,
            extension=acc.extension, quirks=self.quirks + self._handled(acc, tokens, source),
            reported=reported_numbers(acc.usage, acc.metrics, acc.sglext), **self._common())

    def _handled(self, acc: StreamAccumulator, tokens: int, source: str) -> tuple[str, ...]:
        """The quirks of a stream that ended well."""
        body = self.body or {}
        quirks = list(acc.calls.problems)
        if (body.get("stream_options") or {}).get("include_usage") and acc.usage is None:
            quirks.append(NO_USAGE)
        if not acc.done:
            quirks.append(NO_DONE)
        if asks_logprobs(body) and not acc.logprobs:
            quirks.append(NO_LOGPROBS)
        # a stop token is often counted but streams no text: one token of slack then
        slack = 0 if acc.finish_reason == "length" else 1
        if source not in (CHARACTERS, TOKENIZER) and tokens > len(acc.chunk_times) + slack:
            quirks.append(SEVERAL_TOKENS_PER_CHUNK)
        return tuple(quirks)
