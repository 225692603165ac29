"""One generation request through the engine: tokenize, submit, then answer whole or as SSE.

Disconnects free the engine slot: a stream's generator is cancelled by Starlette when the
client goes away, and a non-streamed request watches its receive channel, so in both cases
`engine.cancel` runs and the engine stops decoding for nobody.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from layergate.reference_engine.api import FinishEvent, GenerationRequest, TokenEvent
from layergate.reference_engine.scheduler import EngineStopped, QueueFull
from layergate.reference_engine.server.answer import AnswerOptions
from layergate.reference_engine.server.errors import APIError, error_body
from layergate.reference_engine.server.events import EventStream
from layergate.reference_engine.server.protocol import ServedEngine
from layergate.reference_engine.server.responses import ResponseMeta, Shaper
from layergate.reference_engine.server.sampling import check_model, check_supported, sampling_params
from layergate.reference_engine.server.schemas import SamplingFields
from layergate.reference_engine.tracing import RequestTrace, RequestTracer

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass(frozen=True)
class Endpoint:
    """What differs between chat and text completions."""

    operation: str  # GenAI operation name
    shaper: type[Shaper]
    tokenize: Callable[[Any, ServedEngine], list[int]]  # (body, engine) -> prompt ids
    # (body, prompt ids, the server's reasoning parser) -> what the answer is parsed into
    answer: Callable[[Any, list[int], str | None], AnswerOptions] | None = None


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


class Generation:
    def __init__(self, engine: ServedEngine, tracer: RequestTracer, retry_after_s: int,
                 reasoning_parser: str | None = None) -> None:
        self.engine = engine
        self.tracer = tracer
        self.retry_after_s = retry_after_s
        self.reasoning_parser = reasoning_parser

    def _decode(self, token_id: int) -> str:
        return self.engine.tokenizer.decode([token_id])

    async def handle(self, request: Request, body: SamplingFields,
                     endpoint: Endpoint) -> Response:
        arrival = time.perf_counter()  # TTFT and queue time count from here
        trace = self.tracer.start(endpoint.operation, request.headers)
        try:
            check_model(body.model, self.engine.model_name)
            check_supported(body)
            ids = await asyncio.to_thread(endpoint.tokenize, body, self.engine)
            params = sampling_params(body, prompt_tokens=len(ids),
                                     context=self.engine.max_model_len)
            meta = ResponseMeta.new(endpoint.shaper.prefix, self.engine.model_name)
            stream = self._submit(GenerationRequest(meta.id, tuple(ids), params, arrival,
                                                    trace.context), trace)
        except APIError as exc:
            trace.fail(exc.message, exc.status)
            raise
        except Exception as exc:
            trace.fail(f"internal error: {type(exc).__name__}", 500)
            raise
        if endpoint.answer is None:
            shaper = endpoint.shaper(meta, self._decode, params.logprobs)
        else:
            shaper = endpoint.shaper(meta, self._decode, params.logprobs,
                                     endpoint.answer(body, ids, self.reasoning_parser))
        if body.stream:
            return StreamingResponse(self._sse(stream, shaper, trace, meta.id),
                                     media_type="text/event-stream", headers=SSE_HEADERS)
        return await self._whole(request, stream, shaper, trace, meta.id)

    def _submit(self, gen: GenerationRequest, trace: RequestTrace) -> EventStream:
        stream = EventStream()
        try:
            self.engine.submit(gen, stream.sink)
        except QueueFull as exc:
            raise APIError(429, f"the engine is at capacity ({exc}); retry later",
                           code="overloaded",
                           headers={"Retry-After": str(self.retry_after_s)}) from exc
        except ValueError as exc:  # the engine's own prompt checks (ours ran first)
            raise APIError(400, str(exc), code="invalid_prompt") from exc
        except EngineStopped as exc:
            raise APIError(503, "the engine is shutting down", code="shutting_down") from exc
        trace.submitted(gen.request_id, gen.params, len(gen.prompt_token_ids))
        return stream

    async def _whole(self, request: Request, stream: EventStream, shaper: Shaper,
                     trace: RequestTrace, request_id: str) -> JSONResponse:
        def gone() -> None:
            self.engine.cancel(request_id)
            stream.abandon()
            trace.fail("client disconnected", 499)

        watcher = asyncio.create_task(_on_disconnect(request, gone))
        tokens: list[TokenEvent] = []
        finish: FinishEvent | None = None
        try:
            async for event in stream:
                if isinstance(event, TokenEvent):
                    tokens.append(event)
                else:
                    finish = event
        finally:
            watcher.cancel()
        if finish is None:  # abandoned: the client is gone, this answer reaches nobody
            return JSONResponse({}, status_code=499)
        trace.finish(finish)
        if finish.finish_reason == "error":
            raise APIError(500, f"the engine failed on this request: {finish.error}",
                           code="engine_error")
        if finish.finish_reason == "cancelled":
            raise APIError(503, "the request was cancelled by the engine (shutting down?)",
                           code="cancelled")
        return JSONResponse(shaper.response(tokens, finish))

    async def _sse(self, stream: EventStream, shaper: Shaper, trace: RequestTrace,
                   request_id: str) -> AsyncIterator[bytes]:
        try:
            first = shaper.first_chunk()
            if first is not None:
                yield _sse(first)
            async for event in stream:
                if isinstance(event, TokenEvent):
                    for chunk in shaper.chunks(event):
                        yield _sse(chunk)
                    continue
                trace.finish(event)
                if event.finish_reason == "error":
                    yield _sse(error_body(500, f"the engine failed on this request: "
                                               f"{event.error}", code="engine_error"))
                else:
                    for chunk in shaper.final_chunks(event):
                        yield _sse(chunk)
            yield b"data: [DONE]\n\n"
        finally:
            if not stream.finished:  # cancelled by a disconnect (or a crash) mid-stream
                self.engine.cancel(request_id)
                trace.fail("client disconnected", 499)


async def _on_disconnect(request: Request, callback: Callable[[], None]) -> None:
    """Waits on the receive channel, which reports `http.disconnect` when the client leaves
    (the body has been read by then, so nothing else is listening)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            callback()
            return
