"""ShareGPT conversations: JSON `[{"id", "conversations": [{"from": "human" | "gpt", "value"}]}]`
(or one such object per line). Each human turn becomes a chat request whose messages are
the conversation so far; the reply that follows it sets `max_tokens` (its length in tokens)
and is kept as the recorded `response`.

Tool calling, in the common shapes of function-calling logs:

- turns `{"from": "function_call", "value": "{\"name\", \"arguments\"}"}` (an object, or a
  list of them for parallel calls) and `{"from": "observation", "value": ...}` (glaive as
  LLaMA-Factory converts it), with the tools as the element's `tools` (a list, or its JSON
  text) and an optional `system` prompt;
- hermes-function-calling: `gpt` turns holding `<tool_call>{...}</tool_call>` blocks,
  `tool` turns holding `<tool_response>...</tool_response>` blocks, and the tools in the
  system prompt's `<tools>...</tools>` (JSON or Python literals, as that dataset writes them);
- OpenAI messages, `{"messages": [{"role", "content", "tool_calls"}, {"role": "tool",
  "tool_call_id", "content"}], "tools": [...]}`, kept as they are.

A call becomes an assistant message with `tool_calls` (content null when it says nothing
else; ids `call_TURN_K` where the log has none) and a result a `tool` message whose
`tool_call_id` is that of the call it answers (the K-th result after a turn of calls answers
its K-th call). A request is made at each human turn and after each run of tool results (the
request an agent sends back with them); its recorded response is the assistant turn that
follows, tool calls included. A reply that calls tools sets no `max_tokens`: how long a call
is depends on how the server's chat template writes it, and a call cut short is no call.
The tools list, when the log has one and it parses, is every request's `tools` (a bare
function `{name, description, parameters}` wrapped as `{"type": "function", "function": ...}`);
otherwise the import report lists the requests (`tools_missing`, `tools_unparsed`). A system
prompt holding the <tools> stays as the log has it."""

from __future__ import annotations

import ast
import json
import re
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
CALL = "function_call"  # a turn of tool calls (glaive, LLaMA-Factory)
RESULTS = ("observation", "tool")  # a turn of tool results (glaive; hermes)
# the roles of an OpenAI message (the `messages` shape)
OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
_BLOCK = {tag: re.compile(rf"<{tag}>(.*?)</{tag}>", re.S)
          for tag in ("tools", "tool_call", "tool_response")}
_BAD = object()  # what did not parse


def _looks_like(head: str) -> bool:
    return '"conversations"' in head or (
        '"messages"' in head and '"custom_id"' not in head and '"offset_s"' not in head)


@trace_format("sharegpt", length_only=False, timed=False, looks_like=_looks_like,
              summary="JSON: [{id, conversations: [{from: human|gpt|function_call|"
                      "observation|tool, value}]} or {messages: [OpenAI messages]}, tools]")
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
    """One request per human turn (and per run of tool results) of conversation `obj`
    (checked whole first, so a bad turn leaves out the conversation, not half of it)."""
    if not isinstance(obj, dict):
        raise TraceError(path, line, "(element)", f"must be an object, got {type(obj).__name__}")
    key = "messages" if "conversations" not in obj and "messages" in obj else "conversations"
    turns = obj.get(key)
    if not isinstance(turns, list):
        raise TraceError(path, line, key, "missing or not a list")
    conversation = _Conversation(path, line, key)
    for i, turn in enumerate(turns):
        conversation.add(turn, i)
    messages, said = conversation.messages, conversation.said
    system = obj.get("system")
    if isinstance(system, str) and system.strip() and not (
            messages and messages[0]["role"] == "system"):
        messages.insert(0, {"role": "system", "content": system})
        said.insert(0, system)
        conversation.unparsed = {i + 1 for i in conversation.unparsed}
    tools = _tools(obj, messages)
    out = []
    for i, message in enumerate(messages):
        if not (message["role"] == "user" or (message["role"] == "tool" and (
                i + 1 == len(messages) or messages[i + 1]["role"] != "tool"))):
            continue
        after = messages[i + 1] if i + 1 < len(messages) else None
        reply = after if after is not None and after["role"] == "assistant" else None
        body: dict[str, Any] = {"messages": messages[: i + 1]}
        if isinstance(tools, list):
            body["tools"] = tools
        response = None
        if reply is not None:
            tokens = max(1, context.count(said[i + 1]))
            calls = bool(reply.get("tool_calls"))
            if not calls:
                body["max_tokens"] = tokens
            response = {"choices": [{"index": 0,
                                     "finish_reason": "tool_calls" if calls else "stop",
                                     "message": {"role": "assistant", "content": None,
                                                 **reply}}],
                        "usage": {"completion_tokens": tokens}}
        seen = messages[: i + 2] if reply is not None else messages[: i + 1]
        notes = []
        if tools is _BAD:
            notes.append("tools_unparsed")
        elif tools is None and any(m.get("tool_calls") for m in seen):
            notes.append("tools_missing")
        if conversation.unparsed & set(range(len(seen))):
            notes.append("calls_unparsed")
        out.append(RequestRow(line, f"sharegpt-{index}-{len(out) + 1}", CHAT, body, response,
                              messages=messages[: i + 1], notes=tuple(notes)))
    if not out:
        raise TraceError(path, line, key, "no human turn")
    return out


class _Conversation:
    """A log's turns as OpenAI messages, with the text each turn held in the log (`said`,
    what a reply's length is counted on) and the messages whose <tool_call> blocks did not
    parse (`unparsed`, kept as text)."""

    def __init__(self, path: Path, line: int, key: str) -> None:
        self.path, self.line, self.key = path, line, key
        self.messages: list[dict[str, Any]] = []
        self.said: list[str] = []
        self.unparsed: set[int] = set()
        self.pending: list[str] = []  # ids of the last calls not yet answered

    def error(self, where: str, message: str) -> TraceError:
        return TraceError(self.path, self.line, where, message)

    def add(self, turn: Any, i: int) -> None:
        where = f"{self.key}[{i}]"
        if not isinstance(turn, dict):
            raise self.error(where, "must be an object with from and value (or role and "
                                    "content)")
        if "from" not in turn and "role" in turn:
            return self._openai(turn, where)
        speaker = turn.get("from")
        if speaker not in ROLES and speaker != CALL and speaker not in RESULTS:
            raise self.error(f"{where}.from", f"unknown speaker {speaker!r} (one of "
                                              f"{', '.join([*ROLES, CALL, *RESULTS])})")
        value = turn.get("value")
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"{where}.value", "must be a non-empty string")
        if speaker == CALL:
            calls = _literal(value)
            calls = calls if isinstance(calls, list) else [calls]
            if not calls or not all(_is_call(c) for c in calls):
                raise self.error(f"{where}.value", "a function_call turn must hold a call "
                                                   '{"name", "arguments"} or a list of them')
            return self._assistant(None, calls, value, i)
        if speaker in RESULTS:
            blocks = _BLOCK["tool_response"].findall(value)
            for text in [b.strip() for b in blocks] if blocks else [value]:
                if not self.pending:
                    raise self.error(where, "a tool result with no tool call before it "
                                            "left to answer")
                self._append({"role": "tool", "tool_call_id": self.pending.pop(0),
                              "content": text}, text)
            return None
        role = ROLES[speaker]
        if role == "assistant" and _BLOCK["tool_call"].search(value):
            calls = [_literal(b.strip()) for b in _BLOCK["tool_call"].findall(value)]
            if all(_is_call(c) for c in calls):
                text = _BLOCK["tool_call"].sub("", value).strip()
                return self._assistant(text or None, calls, value, i)
            self.unparsed.add(len(self.messages))
        self.pending = []
        self._append({"role": role, "content": value}, value)
        return None

    def _assistant(self, text: str | None, calls: list[dict[str, Any]], said: str,
                   i: int) -> None:
        tool_calls = []
        for k, call in enumerate(calls):
            args = call["arguments"]
            tool_calls.append({"id": f"call_{i}_{k}", "type": "function", "function": {
                "name": call["name"],
                "arguments": args if isinstance(args, str) else json.dumps(
                    args, ensure_ascii=False)}})
        self.pending = [c["id"] for c in tool_calls]
        self._append({"role": "assistant", "content": text, "tool_calls": tool_calls}, said)

    def _openai(self, message: dict[str, Any], where: str) -> None:
        role = message.get("role")
        if role not in OPENAI_ROLES:
            raise self.error(f"{where}.role", f"unknown role {role!r} (one of "
                                              f"{', '.join(OPENAI_ROLES)})")
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            if not isinstance(calls, list) or not all(
                    isinstance(c, dict) and isinstance(c.get("function"), dict)
                    and isinstance(c["function"].get("name"), str) for c in calls):
                raise self.error(f"{where}.tool_calls", "must be a list of "
                                                        '{"id", "type", "function": {"name", '
                                                        '"arguments"}}')
        elif "content" not in message:
            raise self.error(f"{where}.content", "missing")
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise self.error(f"{where}.tool_call_id", "a tool message must name the call it "
                                                      "answers")
        content = message.get("content")
        said = content if isinstance(content, str) else ""
        for call in calls or ():  # what a call generates: its name and its arguments' text
            arguments = call["function"].get("arguments")
            said += call["function"]["name"] + (arguments if isinstance(arguments, str) else
                                                json.dumps(arguments, ensure_ascii=False))
        self._append(dict(message), said)

    def _append(self, message: dict[str, Any], said: str) -> None:
        self.messages.append(message)
        self.said.append(said)


def _tools(obj: dict[str, Any], messages: list[dict[str, Any]]) -> Any:
    """The conversation's tools as OpenAI's `tools`: from its `tools` field (a list, or its
    JSON text), else from the <tools> blocks of its system prompt; None when it names none,
    _BAD when they do not parse."""
    given = obj.get("tools")
    if isinstance(given, str):
        given = _literal(given) if given.strip() else None
    if given is None or given == []:
        given = _system_tools(messages)
        if given is None:
            return None
    if not isinstance(given, list):
        return _BAD
    tools = []
    for tool in given:
        if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(
                tool.get("function"), dict) and isinstance(tool["function"].get("name"), str):
            tools.append(tool)
        elif isinstance(tool, dict) and isinstance(tool.get("name"), str):
            tools.append({"type": "function", "function": tool})
        else:
            return _BAD
    return tools or None  # an empty list names no tools (and OpenAI refuses one)


def _system_tools(messages: list[dict[str, Any]]) -> list[Any] | None:
    """What the <tools> blocks of the system prompt hold (hermes), one list for all of them;
    None when it has no block with something in it."""
    system = messages[0].get("content") if messages and messages[0]["role"] == "system" \
        else None
    blocks = [b.strip() for b in _BLOCK["tools"].findall(system)] \
        if isinstance(system, str) else []
    blocks = [b for b in blocks if b]  # "within <tools></tools> XML tags" names none
    if not blocks:
        return None
    found: list[Any] = []
    for block in blocks:
        value = _literal(block)
        if value is _BAD:  # one tool per line, as some templates write them
            value = [_literal(part) for part in block.splitlines() if part.strip()]
        found.extend(value if isinstance(value, list) else [value])
    return found


def _is_call(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("name"), str) and \
        isinstance(value.get("arguments"), dict | str)


def _literal(text: str) -> Any:
    """JSON text, or a Python literal of JSON's values (hermes-function-calling writes its
    tools and calls with single quotes and True); _BAD when it is neither."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _BAD
    return value if _json_value(value) else _BAD


def _json_value(value: Any) -> bool:
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list):
        return all(_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_value(v) for k, v in value.items())
    return False
