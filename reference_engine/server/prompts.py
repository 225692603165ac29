"""Prompts to token ids: the model's own chat template for chat, plain encoding (or ids as
given) for completions. Tokenizing is CPU work, so callers run these off the event loop."""

from __future__ import annotations

from typing import Any

from layergate.reference_engine.server.errors import APIError
from layergate.reference_engine.server.schemas import ChatMessage


def chat_prompt_ids(tokenizer: Any, messages: list[ChatMessage]) -> list[int]:
    if not getattr(tokenizer, "chat_template", None):
        raise APIError(400, "this model has no chat template; use /v1/completions",
                       param="messages", code="chat_template_missing")
    # `developer` is OpenAI's newer name for `system`; model templates know only the latter
    turns = [{"role": "system" if m.role == "developer" else m.role, "content": m.text()}
             for m in messages]
    try:
        text = tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=False)
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
