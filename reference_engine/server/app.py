"""The FastAPI app factory: OpenAI-compatible routes over one engine and one registry."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from layergate.reference_engine.server.answer import AnswerOptions
from layergate.reference_engine.server.auth import BearerAuth
from layergate.reference_engine.server.content_type import JSONBodies
from layergate.reference_engine.server.errors import APIError, install_error_handlers
from layergate.reference_engine.server.generation import Endpoint, Generation
from layergate.reference_engine.server.limits import DEFAULT_MAX_BODY_BYTES, BodySizeLimit
from layergate.reference_engine.server.prompts import chat_prompt_ids, completion_prompt_ids
from layergate.reference_engine.server.protocol import ServedEngine
from layergate.reference_engine.server.responses import ChatShaper, CompletionShaper
from layergate.reference_engine.server.schemas import ChatCompletionRequest, CompletionRequest
from layergate.reference_engine.tracing import RequestTracer


@dataclass(frozen=True)
class ServerSettings:
    api_key: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    retry_after_s: int = 1  # sent with 429: a CPU engine frees a slot within seconds
    drain_on_shutdown: bool = True
    # split reasoning off every chat answer by these markers (`serve --reasoning-parser`)
    reasoning_parser: str | None = None


def chat_answer(body: ChatCompletionRequest, ids: list[int],
                reasoning_parser: str | None) -> AnswerOptions:
    """Tool calls are parsed when the request has tools (and tool_choice is not "none");
    reasoning is split off under the server's reasoning parser, or when the request asks
    with `chat_template_kwargs.thinking: true` (granite's switch), by granite's markers."""
    tools = bool(body.tools) and body.tool_choice != "none"
    if (body.chat_template_kwargs or {}).get("thinking") is True:
        reasoning_parser = reasoning_parser or "granite"
    return AnswerOptions(tools=tools, reasoning=reasoning_parser,
                         call_id_seed=",".join(map(str, ids)).encode())


CHAT = Endpoint("chat", ChatShaper,
                lambda body, engine: chat_prompt_ids(engine.tokenizer, body.messages,
                                                     body.tools, body.chat_template_kwargs),
                chat_answer)
COMPLETION = Endpoint("text_completion", CompletionShaper,
                      lambda body, engine: completion_prompt_ids(
                          engine.tokenizer, body.prompt, len(engine.tokenizer)))

_ERRORS = {status: {"description": "OpenAI-style error: {\"error\": {message, type, param, "
                                   "code}}"} for status in (400, 401, 404, 413, 429)}


def create_app(engine: ServedEngine, registry: CollectorRegistry,
               settings: ServerSettings | None = None,
               tracer_provider: TracerProvider | None = None) -> FastAPI:
    """The app starts the engine on startup and drains it on shutdown (after uvicorn has
    let in-flight requests finish)."""
    settings = settings or ServerSettings()
    state = {"ready": False}

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        engine.start()
        state["ready"] = True
        try:
            yield
        finally:
            state["ready"] = False
            await asyncio.to_thread(engine.shutdown, settings.drain_on_shutdown)
            if tracer_provider is not None:
                tracer_provider.shutdown()

    app = FastAPI(title="layergate reference engine", version="1", lifespan=lifespan,
                  summary="OpenAI-compatible server for layer-skipping experiments")
    install_error_handlers(app)
    generation = Generation(engine, RequestTracer(tracer_provider, engine.model_name),
                            settings.retry_after_s, settings.reasoning_parser)
    created = int(time.time())

    def model_card() -> dict[str, Any]:
        return {"id": engine.model_name, "object": "model", "created": created,
                "owned_by": "layergate", "max_model_len": engine.max_model_len}

    @app.post("/v1/chat/completions", responses=_ERRORS)
    async def chat_completions(request: Request, body: ChatCompletionRequest):
        return await generation.handle(request, body, CHAT)

    @app.post("/v1/completions", responses=_ERRORS)
    async def completions(request: Request, body: CompletionRequest):
        return await generation.handle(request, body, COMPLETION)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model}", responses={404: _ERRORS[404]})
    async def model(model: str) -> dict[str, Any]:
        if model != engine.model_name:
            raise APIError(404, f"the model `{model}` does not exist", param="model",
                           code="model_not_found")
        return model_card()

    @app.get("/health")
    async def health() -> JSONResponse:
        ok = state["ready"]
        return JSONResponse({"status": "ok" if ok else "unavailable",
                             "model": engine.model_name, "queue_depth": engine.queue_depth,
                             "running": engine.running}, status_code=200 if ok else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    # added innermost first: the key is checked before a byte of the body is read
    app.add_middleware(JSONBodies)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    if settings.api_key:
        app.add_middleware(BearerAuth, api_key=settings.api_key)
    return app
