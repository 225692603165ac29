"""From a validated request to the engine's `SamplingParams`: the checks that need the
served model (its name, its context length) and the options we refuse rather than ignore."""

from __future__ import annotations

from layergate.reference_engine.api import SamplingParams
from layergate.reference_engine.server.errors import APIError
from layergate.reference_engine.server.schemas import (
    ChatCompletionRequest,
    CompletionRequest,
    SamplingFields,
)

DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
# OpenAI's chat default is "the rest of the context"; bounded so a forgotten max_tokens
# cannot hold a CPU slot for thousands of tokens
DEFAULT_CHAT_MAX_TOKENS = 256
NEGLIGIBLE = 1e-6  # temperature / top_p below this mean greedy


def check_model(requested: str | None, served: str) -> None:
    if requested is not None and requested != served:
        raise APIError(404, f"the model `{requested}` does not exist; this server serves "
                            f"`{served}`", param="model", code="model_not_found")


def check_supported(req: SamplingFields) -> None:
    """Options that would change the output if honoured: refused, never silently dropped."""
    if req.n not in (None, 1):
        raise APIError(400, f"n={req.n} is not supported: one choice per request",
                       param="n", code="unsupported_value")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(req, name) not in (None, 0.0):
            raise APIError(400, f"{name} is not supported (only 0)", param=name,
                           code="unsupported_value")
    if req.logit_bias:
        raise APIError(400, "logit_bias is not supported", param="logit_bias",
                       code="unsupported_value")
    if isinstance(req, CompletionRequest):
        if req.echo:
            raise APIError(400, "echo is not supported", param="echo", code="unsupported_value")
        if req.suffix:
            raise APIError(400, "suffix is not supported", param="suffix",
                           code="unsupported_value")
        if req.best_of not in (None, 1):
            raise APIError(400, f"best_of={req.best_of} is not supported", param="best_of",
                           code="unsupported_value")
    if isinstance(req, ChatCompletionRequest) and req.top_logprobs and not req.logprobs:
        raise APIError(400, "top_logprobs needs logprobs=true", param="top_logprobs",
                       code="invalid_value")
    if isinstance(req, ChatCompletionRequest):
        check_tool_choice(req)


def check_tool_choice(req: ChatCompletionRequest) -> None:
    """`auto` (the default with tools) and `none` are honoured: calls are parsed from what
    the model writes, or not. Forcing a call needs constrained decoding, which this engine
    does not have, so `required` and a named function are refused."""
    choice = req.tool_choice
    if choice is None or choice == "none":
        return
    if not req.tools:
        raise APIError(400, "tool_choice needs `tools`", param="tool_choice",
                       code="invalid_value")
    if choice != "auto":
        shown = choice if isinstance(choice, str) else f"function {choice.function.name}"
        raise APIError(400, f"tool_choice {shown} is not supported (only auto and none): the "
                            "engine parses calls from the model's text and cannot force one",
                       param="tool_choice", code="unsupported_value")


def _max_tokens(req: SamplingFields, prompt_tokens: int, context: int) -> int:
    room = context - prompt_tokens
    prompt_param = "messages" if isinstance(req, ChatCompletionRequest) else "prompt"
    if prompt_tokens == 0:
        raise APIError(400, "the prompt is empty", param=prompt_param, code="invalid_value")
    if room <= 0:
        raise APIError(400, f"this model's maximum context length is {context} tokens, and "
                            f"the prompt has {prompt_tokens}", param=prompt_param,
                       code="context_length_exceeded")
    requested = req.max_tokens
    if isinstance(req, ChatCompletionRequest) and req.max_completion_tokens is not None:
        requested = req.max_completion_tokens
    if requested is None:
        default = (DEFAULT_CHAT_MAX_TOKENS if isinstance(req, ChatCompletionRequest)
                   else DEFAULT_COMPLETION_MAX_TOKENS)
        return min(default, room)
    if requested > room:
        raise APIError(400, f"this model's maximum context length is {context} tokens; "
                            f"you asked for {prompt_tokens + requested} ({prompt_tokens} in the "
                            f"prompt, {requested} in the completion)", param="max_tokens",
                       code="context_length_exceeded")
    return requested


def sampling_params(req: SamplingFields, *, prompt_tokens: int, context: int) -> SamplingParams:
    temperature = 1.0 if req.temperature is None else req.temperature
    top_p = 1.0 if req.top_p is None else req.top_p
    # Both limits are greedy decoding; values this small underflow float32 in the sampler
    # (a temperature of 5e-324 divides by zero), so they are taken at their limit.
    if top_p < NEGLIGIBLE or temperature < NEGLIGIBLE:
        temperature, top_p = 0.0, 1.0
    if isinstance(req, ChatCompletionRequest):
        want, top = bool(req.logprobs), req.top_logprobs or 0
    else:
        want, top = req.logprobs is not None, req.logprobs or 0
    return SamplingParams(max_tokens=_max_tokens(req, prompt_tokens, context),
                          temperature=temperature, top_p=top_p, seed=req.seed,
                          stop=req.stop_sequences(), logprobs=want, top_logprobs=top)
