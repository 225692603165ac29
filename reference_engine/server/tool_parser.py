"""Tool calls in the model's text, in the *pythonic* format of vLLM's `pythonic` tool parser
(`--tool-call-parser pythonic`: vllm/tool_parsers/pythonic_tool_parser.py and the helpers
of vllm/tool_parsers/utils.py of vLLM 0.32, ported here):

    [get_weather(city="Paris", unit="C"), get_time(zone="CET")]

The whole output is one Python list of calls with keyword arguments whose values are
literals (strings, numbers, True/False/None or null/true/false, lists, tuples, sets and dicts
of them, signed numbers). It must match vLLM's pattern from its first character (no leading
text) and then parse with `ast`; the first statement counts, as in vLLM. Anything else is
plain content. Each call's arguments become JSON text (`json.dumps(..., ensure_ascii=False)`,
as vLLM writes them).

`could_be_calls(prefix)` is what a stream asks while it holds text back: False once no
continuation of the prefix can match the pattern, so the held text is content for sure.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from typing import Any

import regex

# vLLM's TOOL_CALL_REGEX, unchanged: the output must look like a list of name(key=value, ...)
TOOL_CALL_PATTERN = regex.compile(
    r"\[([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s)?\),\s*)*"
    r"([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s*)?\)\s*)+\]",
    regex.DOTALL)
# vLLM's VLLM_TOOL_PARSE_REGEX_TIMEOUT_SECONDS default: a pathological output is content
REGEX_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: str  # JSON text of an object


class _NotACall(ValueError):
    """The text is not a list of calls with literal arguments."""


def parse_calls(text: str) -> list[ParsedCall] | None:
    """The calls of a whole output, or None when it is plain content."""
    try:
        if TOOL_CALL_PATTERN.match(text, timeout=REGEX_TIMEOUT_S) is None:
            return None
    except TimeoutError:
        return None
    try:
        module = ast.parse(text)
        parsed = getattr(module.body[0], "value", None) if module.body else None
        if not isinstance(parsed, ast.List) or not all(isinstance(e, ast.Call)
                                                       for e in parsed.elts):
            raise _NotACall("the output must be a list of function calls")
        return [_call(e) for e in parsed.elts]  # type: ignore[arg-type]
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def could_be_calls(prefix: str) -> bool:
    """False when no continuation of `prefix` can be a list of calls (so it is content)."""
    try:
        return TOOL_CALL_PATTERN.match(prefix, partial=True, timeout=REGEX_TIMEOUT_S) is not None
    except TimeoutError:
        return True  # undecided: the whole output decides


def _call(node: ast.Call) -> ParsedCall:
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:  # f(**{...}): vLLM would name it "null"; not a call here
            raise _NotACall("arguments must be given by name")
        arguments[keyword.arg] = _value(keyword.value)
    # not JSON (vLLM would send it anyway): an infinite number (1e999), a lone surrogate
    # ("\ud800") that no UTF-8 answer can carry
    text = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")
    return ParsedCall(_name(node.func), text)


def _name(node: ast.expr) -> str:
    """A plain name, or a dotted one (`a.b.c(...)` is named "a.b.c"), as vLLM 0.32."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise _NotACall("a tool's name must be a plain or dotted name")
    return ".".join([node.id, *reversed(parts)])


_JSON_NAMES = {"null": None, "true": True, "false": False}  # JSON spellings models write


def _value(node: ast.expr) -> Any:
    """A literal argument, as vLLM 0.32 reads one: constants (no bytes, complex or ...),
    dicts with literal keys, lists, tuples and sets (as lists), f-strings without
    placeholders, null / true / false, and signed numbers."""
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, str | int | float):
            return node.value
        raise _NotACall("arguments must be JSON values")
    if isinstance(node, ast.Dict):
        if not all(isinstance(k, ast.Constant) for k in node.keys):
            raise _NotACall("dict arguments must have literal keys")
        return {k.value: _value(v)  # type: ignore[union-attr]
                for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values)  # type: ignore[attr-defined]
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _value(node.operand)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    raise _NotACall("tool call arguments must be literals")


def argument_fragments(arguments: str) -> list[str]:
    """The arguments' JSON text cut where a stream would send it: the opening brace with
    the first key, each value, each further key (`{"city": `, `"Paris"`, `, "unit": `,
    `"C"`, `}`). Joined, they are `arguments` exactly."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return [arguments]
    if not isinstance(value, dict) or not value:
        return [arguments]
    pieces = []
    for i, (key, item) in enumerate(value.items()):
        pieces.append(("{" if i == 0 else ", ") + json.dumps(key, ensure_ascii=False) + ": ")
        pieces.append(json.dumps(item, ensure_ascii=False))
    pieces.append("}")
    return pieces if "".join(pieces) == arguments else [arguments]


def pythonic(name: str, arguments: str) -> str:
    """One call written back in the format the model is asked for: how an assistant's
    earlier `tool_calls` appear in a prompt (`get_weather(city="Paris", unit="C")`)."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return f"{name}({arguments})"
    if not isinstance(value, dict):
        return f"{name}({arguments})"
    return f"{name}({', '.join(f'{k}={_literal(v)}' for k, v in value.items())})"


def _literal(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)}: {_literal(v)}"
                               for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)  # strings and numbers: valid Python too
