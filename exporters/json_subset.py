"""A subset of JSON Schema, checked without a dependency: `type` (a name or a list of
names), `properties`, `required`, `enum`, `const`, `items`, `additionalProperties`
(true / false), and the annotations `title`, `description`, `$schema`, `$id`, `default`,
`examples`, which are ignored. Any other keyword is refused when the reference is read, so
a schema is never checked less than it says."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from layergate.exporters.errors import UsageError

TYPES = ("object", "array", "string", "number", "integer", "boolean", "null")
CHECKED = ("type", "properties", "required", "enum", "const", "items", "additionalProperties")
IGNORED = ("title", "description", "$schema", "$id", "default", "examples")


class SchemaError(UsageError, ValueError):
    """A schema outside the subset; `path` names the bad keyword (`schema.properties.x`)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


def check_schema(schema: Any, path: str = "schema") -> None:
    """Raise SchemaError naming the first part of `schema` outside the subset."""
    if not isinstance(schema, Mapping):
        raise SchemaError(path, f"must be an object, got {type(schema).__name__}")
    for key in schema:
        if key not in CHECKED and key not in IGNORED:
            raise SchemaError(f"{path}.{key}", "keyword outside the subset layergate checks "
                                               f"({', '.join(CHECKED)})")
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if not isinstance(kinds, list) or any(k not in TYPES for k in kinds):
        raise SchemaError(f"{path}.type", f"must be one of {', '.join(TYPES)} or a list of "
                                          f"them: {schema.get('type')!r}")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise SchemaError(f"{path}.properties", "must be an object of schemas")
    for name, sub in properties.items():
        check_schema(sub, f"{path}.properties.{name}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaError(f"{path}.required", "must be a list of property names")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise SchemaError(f"{path}.enum", "must be a list of values")
    if "items" in schema:
        check_schema(schema["items"], f"{path}.items")
    if not isinstance(schema.get("additionalProperties", True), bool):
        raise SchemaError(f"{path}.additionalProperties", "must be true or false (a schema "
                                                          "there is outside the subset)")


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, {"object": dict, "array": list, "string": str,
                              "boolean": bool, "null": type(None)}[kind])


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) \
        else a == b


def valid(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether `value` (parsed JSON) satisfies `schema` (checked by `check_schema`)."""
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if kinds and not any(_is(value, k) for k in kinds):
        return False
    if "enum" in schema and not any(_equal(value, e) for e in schema["enum"]):
        return False
    if "const" in schema and not _equal(value, schema["const"]):
        return False
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        if any(name not in value for name in schema.get("required", [])):
            return False
        if schema.get("additionalProperties", True) is False and set(value) - set(properties):
            return False
        if not all(valid(value[k], sub) for k, sub in properties.items() if k in value):
            return False
    if isinstance(value, list) and "items" in schema:
        return all(valid(item, schema["items"]) for item in value)
    return True
