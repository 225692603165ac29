"""JSON Schema checks, by the `jsonschema` library: the whole vocabulary (`minimum`,
`pattern`, `oneOf`, `$ref`, ...) of draft 2020-12, or of the draft a schema's `$schema`
names. Tools' parameters, response formats and `json_schema` references use it.

`$ref` resolves only inside the schema (`#/$defs/...`, `#/definitions/...`, an embedded
`$id`): a remote one is a SchemaError naming it, never a network access, so a check gives
the same answer on every machine. `format` is an annotation, as draft 2020-12 says, not
an assertion. Compiled validators are cached by the schema's canonical JSON text, because
the same tool and response schemas come with every request of a scenario."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as _MetaSchemaError
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing import Registry, Resource, Specification
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import UnknownDialect

from layergate.exporters.errors import UsageError

if TYPE_CHECKING:  # the class is public only through referencing's own modules
    from referencing._core import Resolver

DEFAULT = Draft202012Validator  # the draft of a schema without `$schema`
_MESSAGE_CHARS = 300  # jsonschema's messages quote the instance, which may be a whole answer
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class SchemaError(UsageError, ValueError):
    """A schema that is not valid JSON Schema, or that refers outside itself; `path` names
    the bad part (`schema.properties.age.minimum`)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path, self.message = path, message


def check_schema(schema: Any, path: str = "schema") -> None:
    """Raise SchemaError naming the first thing wrong in `schema`: not JSON, an unknown
    `$schema`, a keyword its draft's metaschema refuses, or a `$ref` that does not resolve
    inside it. `path` names the schema itself in the message."""
    _compiled(_canonical(schema, path), path)


def errors(instance: Any, schema: Mapping[str, Any] | bool) -> tuple[str, ...]:
    """Each way `instance` (parsed JSON) breaks `schema`, as "at <json path>: <message>",
    in path order; empty when it is valid. Raises SchemaError for a bad schema."""
    validator = _compiled(_canonical(schema, "schema"), "schema")
    try:
        found = sorted(validator.iter_errors(instance),
                       key=lambda e: (_order(e.absolute_path), e.message))
    except Unresolvable as exc:  # a reference in a keyword check_schema's walk skips
        raise SchemaError("schema", f"cannot resolve {exc.ref!r}: {_NO_FETCH}") from None
    return tuple(f"at {json_path(e.absolute_path)}: {_short(_explain(e))}" for e in found)


def valid(instance: Any, schema: Mapping[str, Any] | bool) -> bool:
    """Whether `instance` (parsed JSON) satisfies `schema`."""
    validator = _compiled(_canonical(schema, "schema"), "schema")
    try:
        return validator.is_valid(instance)
    except Unresolvable as exc:
        raise SchemaError("schema", f"cannot resolve {exc.ref!r}: {_NO_FETCH}") from None


def json_path(parts: Any) -> str:
    """`$.a.b[0]["odd key"]` for the keys and indexes `parts`."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _NAME.match(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part, ensure_ascii=False)}]"
    return out


_NO_FETCH = ("layergate never fetches remote schemas; put the definition under $defs and "
             "refer to it as #/$defs/NAME")


def _refuse(uri: str) -> Resource:
    raise NoSuchResource(ref=uri)


_REGISTRY: Registry = Registry(retrieve=_refuse)  # remote refs: NoSuchResource


def _canonical(schema: Any, path: str) -> str:
    try:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SchemaError(path, f"must be JSON ({exc})") from None


@lru_cache(maxsize=512)
def _compiled(text: str, path: str) -> Validator:
    """The validator for the schema whose canonical JSON is `text` (parsed afresh, so a
    caller changing its dict later cannot change a cached validator)."""
    schema = json.loads(text)
    if not isinstance(schema, dict | bool):
        raise SchemaError(path, f"must be an object or a boolean, got {type(schema).__name__}")
    cls = _validator_class(schema, path)
    try:
        cls.check_schema(schema)
    except _MetaSchemaError as exc:
        raise SchemaError(_dotted(path, exc.absolute_path), _explain(exc)) from None
    if isinstance(schema, dict):
        spec = Specification.detect(cls.META_SCHEMA)  # the draft's own, $schema decided cls
        resolver = _REGISTRY.resolver_with_root(spec.create_resource(schema))
        _check_refs(schema, spec, resolver, path)
    return cls(schema, registry=_REGISTRY)


def _validator_class(schema: dict | bool, path: str) -> type[Validator]:
    if not isinstance(schema, dict) or "$schema" not in schema:
        return DEFAULT
    dialect = schema["$schema"]
    # default=None: an unknown $schema is refused, not checked quietly by another draft
    cls = validator_for(schema, default=None) if isinstance(dialect, str) else None
    if cls is None:
        raise SchemaError(f"{path}.$schema", f"unknown draft {dialect!r} (known: drafts 3, 4, "
                                             "6, 7, 2019-09 and 2020-12 by their "
                                             "json-schema.org URIs)")
    return cls


def _check_refs(contents: dict, spec: Specification, resolver: Resolver, path: str) -> None:
    """Resolve every `$ref` in `contents` (a schema `resolver` is based at) now, so one that
    points outside the schema, or at nothing, is refused when the schema is read rather
    than halfway through a run."""
    for keyword in _REFS:
        ref = contents.get(keyword)
        if not isinstance(ref, str):
            continue
        try:
            resolver.lookup(ref)
        except Unresolvable:
            why = "nothing in the schema is there" if ref.startswith("#") else _NO_FETCH
            raise SchemaError(f"{path}.{keyword}", f"cannot resolve {ref!r}: {why}") from None
    places = dict(_children(contents, path))
    for sub in spec.subresources_of(contents):
        if not isinstance(sub, dict):
            continue  # a boolean schema refers to nothing
        where = places.get(id(sub), path)
        try:
            sub_spec = spec.detect(sub)  # its own $schema, else its parent's draft
        except UnknownDialect:
            raise SchemaError(f"{where}.$schema", f"unknown draft {sub['$schema']!r}") from None
        sub_resolver = resolver.in_subresource(sub_spec.create_resource(sub))
        _check_refs(sub, sub_spec, sub_resolver, where)


def _children(contents: dict, path: str) -> Iterator[tuple[int, str]]:
    """(id, dotted path) of the values one and two levels down, where a draft's
    subschemas sit (`items`, `properties.NAME`, `allOf.0`)."""
    for key, value in contents.items():
        here = f"{path}.{key}"
        yield id(value), here
        inner = value.items() if isinstance(value, dict) else \
            enumerate(value) if isinstance(value, list) else ()
        for name, sub in inner:
            yield id(sub), f"{here}.{name}"


def _explain(exc: ValidationError | _MetaSchemaError) -> str:
    """The complaint, with the alternatives of an anyOf / oneOf spelt out
    ("'thing' is not valid under any of the given schemas" alone does not say why)."""
    reasons = sorted({c.message for c in exc.context})
    return exc.message + (f" ({'; '.join(reasons)})" if reasons else "")


def _dotted(path: str, parts: Any) -> str:
    return ".".join([path, *(str(p) for p in parts)])


def _order(parts: Any) -> tuple[tuple[int, int, str], ...]:
    """Sort key for a path: indexes numerically (2 before 10), keys by name."""
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in parts)


def _short(message: str) -> str:
    return message if len(message) <= _MESSAGE_CHARS else message[:_MESSAGE_CHARS - 1] + "…"
