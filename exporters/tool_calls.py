"""A tool call as an answer carries it: the function's name and its arguments as the text
the server sent (fragments joined in arrival order), compared as JSON, never as text.

Two calls agree when their names are equal and their arguments parse to equal JSON values
(`canonical`); arguments that never parse are recorded as sent and agree with nothing, not
even with the same text, since no client could have called the function with them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


@dataclass(frozen=True)
class ToolCall:
    """One call of an answer: `index` is the stream's (the order the calls were made),
    `arguments` the raw text (a legacy `function_call` is index 0)."""

    name: str | None
    arguments: str = ""
    id: str | None = None
    index: int = 0
    type: str = "function"

    def parsed(self) -> tuple[bool, Any]:
        """(whether the arguments parse as JSON, their value); an empty text is `{}`, as
        servers send a call that takes no arguments."""
        if not self.arguments.strip():
            return True, {}
        try:
            return True, json.loads(self.arguments)
        except ValueError:
            return False, None

    def canonical(self) -> str | None:
        """The arguments as canonical JSON (keys sorted, no spaces); None: they do not parse."""
        ok, value = self.parsed()
        return _CANONICAL(value) if ok else None

    def to_wire(self) -> dict[str, Any]:
        """The call as a non-streamed OpenAI message carries it."""
        return {"id": self.id, "type": self.type,
                "function": {"name": self.name, "arguments": self.arguments}}


def to_json(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """The calls as the store keeps them."""
    return [{"index": c.index, "id": c.id, "name": c.name, "arguments": c.arguments}
            for c in calls]


def from_json(items: Iterable[Any]) -> tuple[ToolCall, ...]:
    """The calls the store kept (`to_json`); an item of another shape is skipped."""
    out = []
    for item in items or ():
        if isinstance(item, dict):
            out.append(ToolCall(name=item.get("name"), arguments=str(item.get("arguments")
                                                                     or ""),
                                id=item.get("id"), index=int(item.get("index") or 0)))
    return tuple(out)


def canonical_calls(calls: Sequence[ToolCall]) -> str:
    """The calls in order as one canonical text (the answer's identity): each call's name
    and canonical arguments, or its raw text marked as unparsed."""
    parts = []
    for call in calls:
        args = call.canonical()
        parts.append([call.name, args] if args is not None else [call.name, None,
                                                                 call.arguments])
    return _CANONICAL(parts)


def rendered(calls: Sequence[ToolCall]) -> str:
    """The calls as text for text figures and diffs: `name(arguments)` a line each, the
    arguments canonical where they parse."""
    return "\n".join(f"{c.name}({c.canonical() if c.canonical() is not None else c.arguments})"
                     for c in calls)


def agree(a: Sequence[ToolCall], b: Sequence[ToolCall]) -> bool:
    """The same calls in the same order: names equal, arguments equal as JSON."""
    return len(a) == len(b) and all(
        x.name == y.name and x.canonical() is not None and x.canonical() == y.canonical()
        for x, y in zip(a, b, strict=True))


def differing_keys(a: Sequence[ToolCall], b: Sequence[ToolCall]) -> list[str]:
    """Which parts differ between two answers' calls, as `name.key` (an argument's key
    whose value differs or that one side lacks), `name` (a call one side lacks or names
    otherwise) or `name.<unparsed>`."""
    out: list[str] = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x is None or y is None or x.name != y.name:
            out.append(str((x or y).name))  # type: ignore[union-attr]
            continue
        ok_x, vx = x.parsed()
        ok_y, vy = y.parsed()
        if not (ok_x and ok_y):
            out.append(f"{x.name}.<unparsed>")
        elif isinstance(vx, dict) and isinstance(vy, dict):
            out += [f"{x.name}.{k}" for k in sorted(set(vx) | set(vy))
                    if _CANONICAL(vx.get(k)) != _CANONICAL(vy.get(k)) or (k in vx) != (k in vy)]
        elif _CANONICAL(vx) != _CANONICAL(vy):
            out.append(f"{x.name}.<arguments>")
    return out



@dataclass
class CallsBuilder:
    """Tool calls merged from a stream's deltas by `index` (openai-python's
    ChatCompletionStreamState does the same): the first delta of an index brings its id and
    name, later ones argument fragments, joined as text and parsed only at the end.
    What does not fit is said in `problems` (catalogue quirks), never raised: a malformed
    delta must not lose the answer."""

    parts: dict[int, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def feed(self, deltas: Any, malformed: str, out_of_order: str) -> bool:
        """Merge one chunk's `delta.tool_calls`; whether it carried any generated text."""
        if isinstance(deltas, dict):  # one call as an object, not a list (older TGI)
            deltas = [deltas]
        if not isinstance(deltas, list):
            self._say(malformed)
            return False
        generated = False
        for delta in deltas:
            index = delta.get("index") if isinstance(delta, dict) else None
            function = delta.get("function") if isinstance(delta, dict) else None
            if not isinstance(index, int) or not isinstance(function or {}, dict):
                self._say(malformed)
                continue
            if index not in self.parts and index != len(self.parts):
                self._say(out_of_order)
            generated |= self._merge(index, delta.get("id"), delta.get("type"), function or {})
        return generated

    def feed_function_call(self, function: Any, malformed: str) -> bool:
        """The legacy `delta.function_call` ({name, arguments}): call 0."""
        if not isinstance(function, dict):
            self._say(malformed)
            return False
        return self._merge(0, None, None, function)

    def _merge(self, index: int, call_id: Any, kind: Any, function: dict[str, Any]) -> bool:
        part = self.parts.setdefault(index, {"id": None, "type": "function", "name": None,
                                             "arguments": []})
        if isinstance(call_id, str) and call_id:
            part["id"] = call_id
        if isinstance(kind, str) and kind:
            part["type"] = kind
        name, args = function.get("name"), function.get("arguments")
        if isinstance(name, str) and name:
            # some servers repeat the name on every delta; others stream it in pieces
            part["name"] = name if part["name"] in (None, name) else part["name"] + name
        if isinstance(args, dict):  # a parsed object where text was meant: keep its JSON
            args = json.dumps(args)
        if isinstance(args, str) and args:
            part["arguments"].append(args)
        return bool(name) or bool(args)

    def _say(self, quirk: str) -> None:
        if quirk not in self.problems:
            self.problems.append(quirk)

    def calls(self, unparsed: str) -> tuple[ToolCall, ...]:
        """The calls in index order; a call whose arguments never parse adds `unparsed`."""
        out = tuple(ToolCall(name=p["name"], arguments="".join(p["arguments"]), id=p["id"],
                             index=i, type=p["type"]) for i, p in sorted(self.parts.items()))
        if any(c.canonical() is None for c in out):
            self._say(unparsed)
        return out


def from_message(items: Any) -> tuple[ToolCall, ...]:
    """The calls of a non-streamed message's `tool_calls` (OpenAI's shape); an item of
    another shape is skipped."""
    out = []
    for i, item in enumerate(items if isinstance(items, list) else ()):
        function = item.get("function") if isinstance(item, dict) else None
        if isinstance(function, dict):
            args = function.get("arguments")
            out.append(ToolCall(name=function.get("name"), index=i, id=item.get("id"),
                                arguments=json.dumps(args) if isinstance(args, dict)
                                else str(args or "")))
    return tuple(out)
