"""Whether an answer met the schemas its request gave: its tool calls against the request's
`tools[].function.parameters`, its content against `response_format`. Checked once, when
the answer is read (replay and capture), and kept on the result (`ArmResult.schema_valid`):
the figures count them without the requests at hand.

Only what the request asked for is checked: no `tools` (or an answer that called none), no
`tool_calls` key; no `response_format` of type `json_object` or `json_schema`, no
`structured` key. A schema that is itself invalid makes every answer to it invalid, the
schema's error being the request's fault, not the arm's: both arms then score alike.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from layergate.exporters.tool_calls import ToolCall

TOOL_CALLS, STRUCTURED = "tool_calls", "structured"


def checks(body: dict[str, Any] | None, calls: Sequence[ToolCall], content: str
           ) -> dict[str, bool]:
    """{"tool_calls": every call valid, "structured": the content valid}, each only where
    the request asked for it."""
    body = body if isinstance(body, dict) else {}
    out: dict[str, bool] = {}
    if calls and isinstance(body.get("tools"), list):
        out[TOOL_CALLS] = all(call_valid(body["tools"], c) for c in calls)
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        out[STRUCTURED] = structured_valid(fmt, content)
    return out


def tool_parameters(tools: list[Any]) -> dict[str, Any]:
    """Function name -> its parameters' schema ({} when it gives none), as the request
    declared them."""
    out: dict[str, Any] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out[function["name"]] = function.get("parameters") or {}
    return out


def call_valid(tools: list[Any], call: ToolCall) -> bool:
    """The call names a declared function and its arguments parse and satisfy its schema."""
    declared = tool_parameters(tools)
    if call.name not in declared:
        return False
    ok, value = call.parsed()
    return ok and _valid(value, declared[call.name])


def structured_valid(fmt: dict[str, Any], content: str) -> bool:
    """The content is a JSON value the format allows: an object for `json_object`, one
    satisfying `json_schema.schema` for `json_schema`."""
    try:
        value = json.loads(content)
    except ValueError:
        return False
    if fmt.get("type") == "json_object":
        return isinstance(value, dict)
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    return _valid(value, schema if isinstance(schema, dict) else {})


def structured_key(content: str) -> str | None:
    """The content's JSON value in canonical form (None: it is no JSON), so two answers that
    say the same JSON with other spacing or key order agree."""
    try:
        value = json.loads(content)
    except ValueError:
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _valid(value: Any, schema: Any) -> bool:
    # jsonschema is loaded by the first answer that has a schema to meet: a replay of
    # plain traffic, which a load host's worker mostly sends, never imports it
    from layergate.exporters import schemas

    try:
        return not schemas.errors(value, schema)
    except schemas.SchemaError:
        return False
