"""`--redact`: mask e-mail addresses, phone numbers and API-key-like strings in the prompts
and responses a capture writes. Masks name what was there (`[EMAIL]`, `[PHONE]`,
`[API_KEY]`) so the length class and the shape of the text survive."""

from __future__ import annotations

import re
from typing import Any

_KEYS = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}"  # OpenAI / Stripe style
    r"|\bBearer\s+[A-Za-z0-9._~+/-]{16,}=*"
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key id
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}\b"  # GitHub tokens
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack tokens
    r"|\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}\b")  # long secrets
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_PHONE = re.compile(r"(?<![\w.])\+?\(?\d[\d\s().-]{5,}\d(?![\w.])")
_PHONE_DIGITS = (7, 15)  # E.164 allows up to 15 digits; fewer than 7 is a number, not a phone


def _phone(match: re.Match[str]) -> str:
    digits = sum(ch.isdigit() for ch in match.group())
    lo, hi = _PHONE_DIGITS
    return "[PHONE]" if lo <= digits <= hi else match.group()


def redact_text(text: str) -> str:
    text = _KEYS.sub("[API_KEY]", text)
    text = _EMAIL.sub("[EMAIL]", text)
    return _PHONE.sub(_phone, text)


def redact(value: Any) -> Any:
    """Redact every string inside a JSON value (request body or response)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, dict):
        return {k: v if k in _KEEP else redact(v) for k, v in value.items()}
    return value


# structural fields whose values are never personal data and must stay intact: ids (a tool
# message's tool_call_id must still name its call), and what the application tells the server
# to answer with (tool definitions, tool_choice, response_format: JSON schemas it wrote, which
# the server needs verbatim to answer the same way)
_KEEP = frozenset({"role", "model", "object", "finish_reason", "id", "token_ids",
                   "layers_executed_per_token", "layer_mask", "policy_fingerprint",
                   "tool_call_id", "type", "tools", "functions", "tool_choice",
                   "response_format", "parallel_tool_calls"})
