"""Prompts to token ids: the model's own chat template for chat, plain encoding (or ids as
given) for completions. Tokenizing is CPU work, so callers run these off the event loop.

Tool use in the prompt, as a server with this model's template does it: `tools` and
`chat_template_kwargs` go to the template (SmolLM2's ignores both, so a request that wants
calls describes its tools in its own system prompt, as the bundled tools.jsonl does). An
assistant turn that made calls is written as the pythonic list the tool parser reads back
(after its content, if any): `[get_weather(city="Paris")]`. A `tool` turn keeps its role: the
template writes it as `<|im_start|>tool` with the result as its content.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from layergate.reference_engine.server.errors import APIError
from layergate.reference_engine.server.schemas import ChatMessage, Tool
from layergate.reference_engine.server.tool_parser import pythonic

# apply_chat_template's own parameters: a template variable of these names would change
# what the call does rather than what the template sees
_RESERVED = {"conversation", "messages", "tools", "add_generation_prompt", "tokenize",
             "kwargs", "self"}


def _reserved(tokenizer: Any) -> set[str]:
    try:
        return _RESERVED | set(inspect.signature(tokenizer.apply_chat_template).parameters)
    except (TypeError, ValueError):
        return _RESERVED


def message_text(message: ChatMessage) -> str:
    """A message's content as the template gets it; calls written in pythonic form."""
    text = message.text()
    if message.tool_calls:
        calls = ", ".join(pythonic(c.function.name, c.function.arguments)
                          for c in message.tool_calls)
        text = f"{text}\n[{calls}]" if text else f"[{calls}]"
    return text


def chat_prompt_ids(tokenizer: Any, messages: list[ChatMessage],
                    tools: Sequence[Tool] | None = None,
                    template_kwargs: dict[str, Any] | None = None) -> list[int]:
    if not getattr(tokenizer, "chat_template", None):
        raise APIError(400, "this model has no chat template; use /v1/completions",
                       param="messages", code="chat_template_missing")
    # `developer` is OpenAI's newer name for `system`; model templates know only the latter
    turns = [{"role": "system" if m.role == "developer" else m.role, "content": message_text(m)}
             for m in messages]
    extra = dict(template_kwargs or {})
    clash = sorted(set(extra) & _reserved(tokenizer))
    if clash:
        raise APIError(400, f"chat_template_kwargs may not set `{clash[0]}`",
                       param="chat_template_kwargs", code="invalid_value")
    if tools:
        extra["tools"] = [t.model_dump(by_alias=True, exclude_none=True) for t in tools]
    try:
        text = tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=False,
                                             **extra)
    except Exception as exc:  # jinja templates raise their own errors for odd conversations
        raise APIError(400, f"the model's chat template rejected these messages: {exc}",
                       param="messages", code="invalid_messages") from exc
    # the template already wrote the special tokens it wants
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def completion_prompt_ids(tokenizer: Any, prompt: Any, vocab_size: int) -> list[int]:
    """`prompt` as the schema allows it: a string, token ids, or a one-element list of
    either. Several prompts in one request would mean several choices, which we refuse."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
        if len(prompt) != 1:
            raise APIError(400, f"only one prompt per request is supported, got {len(prompt)}",
                           param="prompt", code="unsupported_value")
        prompt = prompt[0]
    if isinstance(prompt, str):
        return list(tokenizer(prompt)["input_ids"])
    bad = [t for t in prompt if t >= vocab_size]
    if bad:
        raise APIError(400, f"token id {bad[0]} is outside the vocabulary (size {vocab_size})",
                       param="prompt", code="invalid_value")
    return list(prompt)
