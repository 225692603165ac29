"""ShareGPT conversations: JSON `[{"id", "conversations": [{"from": "human" | "gpt", "value"}]}]`
(or one such object per line). Each human turn becomes a chat request whose messages are
the conversation so far; the reply that follows it sets `max_tokens` (its length in tokens)
and is kept as the recorded `response`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from layergate.exporters.traffic import CHAT
from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import RequestRow
from layergate.harness.traces.source import TraceError, first_line, json_array, json_lines

ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant",
         "bing": "assistant", "bard": "assistant", "assistant": "assistant",
         "system": "system"}


def _looks_like(head: str) -> bool:
    return '"conversations"' in head


@trace_format("sharegpt", length_only=False, timed=False, looks_like=_looks_like,
              summary='JSON: [{id, conversations: [{from: human|gpt, value}]}]')
def read(path: Path, context: ReadContext) -> Iterator[RequestRow | TraceError]:
    rows = json_array(path) if first_line(path).startswith("[") else json_lines(path)
    for index, (line, obj) in enumerate(rows, start=1):
        if isinstance(obj, TraceError):
            yield obj
            continue
        try:
            yield from requests(obj, path, line, index, context)
        except TraceError as exc:
            yield exc


def requests(obj: Any, path: Path, line: int, index: int,
             context: ReadContext) -> list[RequestRow]:
    """One request per human turn of conversation `obj` (checked whole first, so a bad turn
    leaves out the conversation, not half of it)."""
    if not isinstance(obj, dict):
        raise TraceError(path, line, "(element)", f"must be an object, got {type(obj).__name__}")
    turns = obj.get("conversations")
    if not isinstance(turns, list):
        raise TraceError(path, line, "conversations", "missing or not a list")
    messages = [_message(turn, path, line, i) for i, turn in enumerate(turns)]
    out = []
    for i, message in enumerate(messages):
        if message["role"] != "user":
            continue
        reply = messages[i + 1]["content"] if i + 1 < len(messages) and \
            messages[i + 1]["role"] == "assistant" else None
        body: dict[str, Any] = {"messages": messages[: i + 1]}
        response = None
        if reply is not None:
            tokens = max(1, context.count(reply))
            body["max_tokens"] = tokens
            response = {"choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply}}],
                        "usage": {"completion_tokens": tokens}}
        out.append(RequestRow(line, f"sharegpt-{index}-{len(out) + 1}", CHAT, body, response,
                              messages=messages[: i + 1]))
    if not out:
        raise TraceError(path, line, "conversations", "no human turn")
    return out


def _message(turn: Any, path: Path, line: int, i: int) -> dict[str, str]:
    where = f"conversations[{i}]"
    if not isinstance(turn, dict):
        raise TraceError(path, line, where, "must be an object with from and value")
    role = ROLES.get(turn.get("from"))
    if role is None:
        raise TraceError(path, line, f"{where}.from", f"unknown speaker {turn.get('from')!r} "
                                                      f"(one of {', '.join(ROLES)})")
    value = turn.get("value")
    if not isinstance(value, str) or not value.strip():
        raise TraceError(path, line, f"{where}.value", "must be a non-empty string")
    return {"role": role, "content": value}
