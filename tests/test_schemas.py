"""JSON Schema checks (exporters/schemas.py): the whole vocabulary is checked (`minimum`,
`pattern`, `oneOf`, `$ref` to `$defs`, `enum`, `additionalProperties`), errors say where
("at $.path") and what, a bad schema is refused naming the bad keyword, an unknown draft is
refused, a remote `$ref` is refused without touching the network, and compiled validators
are cached by the schema's canonical text."""

from __future__ import annotations

import socket

import pytest

from layergate.exporters import schemas
from layergate.exporters.schemas import SchemaError, check_schema, errors, valid

PERSON = {
    "type": "object",
    "required": ["name", "age"],
    "additionalProperties": False,
    "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "country": {"$ref": "#/$defs/code"},
        "unit": {"enum": ["metric", "imperial"]},
        "contact": {"oneOf": [
            {"type": "object", "required": ["email"], "properties": {"email": {"type": "string"}}},
            {"type": "object", "required": ["phone"], "properties": {"phone": {"type": "string"}}},
        ]},
    },
}


@pytest.mark.parametrize(("instance", "wanted"), [
    ({"name": "Ann", "age": 3, "country": "FRA", "unit": "metric",
      "contact": {"email": "a@b"}}, ()),
    ({"name": "Ann", "age": 3.0}, ()),  # 1.0 is an integer
    ({"name": "Ann", "age": -1}, ("at $.age: -1 is less than the minimum of 0",)),
    ({"name": "Ann", "age": True}, ("at $.age: True is not of type 'integer'",)),
    ({"name": "Ann", "age": 3, "country": "fr"}, ("at $.country: 'fr' does not match "
                                                  "'^[A-Z]{3}$'",)),
    ({"name": "Ann", "age": 3, "unit": "cubits"}, ("at $.unit: 'cubits' is not one of "
                                                   "['metric', 'imperial']",)),
    ({"name": "Ann", "age": 3, "x": 1}, ("at $: Additional properties are not allowed ('x' "
                                         "was unexpected)",)),
    ({"name": "Ann"}, ("at $: 'age' is a required property",)),
])
def test_errors_say_where_and_what(instance: dict, wanted: tuple[str, ...]) -> None:
    assert errors(instance, PERSON) == wanted
    assert valid(instance, PERSON) is (wanted == ())


def test_one_of_wants_exactly_one() -> None:
    both = {"name": "Ann", "age": 3, "contact": {"email": "a", "phone": "1"}}
    neither = {"name": "Ann", "age": 3, "contact": {"fax": "1"}}
    assert errors(both, PERSON)[0].startswith("at $.contact: ")
    assert "is valid under each of" in errors(both, PERSON)[0]
    found = errors(neither, PERSON)
    assert len(found) == 1 and "not valid under any of the given schemas" in found[0]
    assert "'email' is a required property" in found[0]  # the alternatives say why


def test_errors_sorted_by_path_indexes_numerically() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    found = errors(["a"] * 12, schema)
    assert [f.split(":")[0] for f in found] == [f"at $[{i}]" for i in range(12)]
    assert errors({"odd key": 1}, {"properties": {"odd key": {"type": "string"}}}) == (
        "at $[\"odd key\"]: 1 is not of type 'string'",)


def test_other_drafts_by_dollar_schema() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#",
              "definitions": {"n": {"type": "integer", "exclusiveMinimum": 0}},
              "items": {"$ref": "#/definitions/n"}}
    check_schema(draft7)
    assert valid([1, 2], draft7) and not valid([0], draft7)
    with pytest.raises(SchemaError) as caught:  # draft 4's exclusiveMinimum is a boolean
        check_schema({**draft7, "$schema": "http://json-schema.org/draft-04/schema#"})
    assert caught.value.path == "schema.definitions.n.exclusiveMinimum"


@pytest.mark.parametrize(("schema", "path", "words"), [
    ({"type": "thing"}, "schema.type", "'thing' is not one of ['array', 'boolean'"),
    ({"properties": {"age": {"minimum": "ten"}}}, "schema.properties.age.minimum",
     "'ten' is not of type 'number'"),
    ({"pattern": "(unclosed"}, "schema.pattern", "'(unclosed' is not a 'regex'"),
    ({"required": "name"}, "schema.required", "'name' is not of type 'array'"),
    ({"items": {"$ref": "#/$defs/missing"}}, "schema.items.$ref",
     "cannot resolve '#/$defs/missing': nothing in the schema is there"),
    ({"$schema": "https://example.com/my-draft"}, "schema.$schema",
     "unknown draft 'https://example.com/my-draft'"),
    ({"a": float("nan")}, "schema", "must be JSON"),
    ([{"type": "string"}], "schema", "must be an object or a boolean, got list"),
])
def test_bad_schema_named(schema: object, path: str, words: str) -> None:
    with pytest.raises(SchemaError) as caught:
        check_schema(schema)
    assert caught.value.path == path
    assert words in caught.value.message
    assert str(caught.value).startswith(f"{path}: ")
    with pytest.raises(SchemaError):
        errors({}, schema)  # type: ignore[arg-type]


@pytest.mark.parametrize(("schema", "path", "ref"), [
    ({"$ref": "https://example.com/person.json"}, "schema.$ref",
     "https://example.com/person.json"),
    ({"properties": {"a": {"$ref": "http://127.0.0.1:9/x.json#/$defs/a"}}},
     "schema.properties.a.$ref", "http://127.0.0.1:9/x.json#/$defs/a"),
    ({"$id": "https://example.com/root.json", "items": {"$ref": "other.json"}},
     "schema.items.$ref", "other.json"),  # relative to $id: another document
    ({"allOf": [{"$dynamicRef": "https://example.com/meta"}]}, "schema.allOf.0.$dynamicRef",
     "https://example.com/meta"),
])
def test_remote_ref_refused_without_network(monkeypatch: pytest.MonkeyPatch, schema: dict,
                                            path: str, ref: str) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    with pytest.raises(SchemaError) as caught:
        check_schema(schema)
    assert caught.value.path == path
    assert repr(ref) in caught.value.message and "never fetches" in caught.value.message


def test_embedded_id_resolves_locally() -> None:
    schema = {"$id": "https://example.com/root.json",
              "$defs": {"n": {"$id": "n.json", "type": "integer"}},
              "items": {"$ref": "n.json"}}
    assert valid([1], schema) and errors(["x"], schema) == ("at $[0]: 'x' is not of type "
                                                          "'integer'",)


def test_validators_cached_by_canonical_text() -> None:
    schemas._compiled.cache_clear()
    one = {"type": "object", "properties": {"a": {"type": "integer"}}}
    same = {"properties": {"a": {"type": "integer"}}, "type": "object"}  # keys reordered
    assert valid({"a": 1}, one) and valid({"a": 2}, same) and errors({"a": "x"}, one)
    info = schemas._compiled.cache_info()
    assert (info.misses, info.hits) == (1, 2)
    one["properties"]["a"]["type"] = "string"  # a caller's later change is a new schema
    assert valid({"a": "x"}, one) and not valid({"a": "x"}, same)


def test_long_messages_are_cut() -> None:
    found = errors({"text": "x" * 5000}, {"properties": {"text": {"maxLength": 3}}})
    assert len(found) == 1 and len(found[0]) < 320 and found[0].endswith("…")
