"""References (exporters/references.py): every kind scores a right output true and a wrong
one false, the extraction rules hold at their edges (labels, cues, numbers with commas and
units, JSON in fences), a bad reference is refused naming its field (through read_traffic
too), and a command reference runs only when allowed, inside its limits."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from layergate.exporters.references import (
    BadReference,
    CommandsDisabled,
    parse_reference,
    score,
)
from layergate.exporters.traffic import TrafficError, read_traffic


def right(raw: dict, text: str, **options) -> bool:
    return score(parse_reference(raw), text, **options)


def test_exact_is_strict_unless_normalised() -> None:
    raw = {"kind": "exact", "answers": ["The Eiffel Tower", "Eiffel"]}
    assert right(raw, "  Eiffel \n")
    assert not right(raw, "the eiffel tower.")
    assert right({**raw, "normalise": True}, "the  Eiffel   Tower!")
    assert not right({**raw, "normalise": True}, "Eiffel Tower in Paris")


def test_contains_wants_whole_words() -> None:
    raw = {"kind": "contains", "answers": ["Paris"]}
    assert right(raw, "I believe it is PARIS, of course.")
    assert not right(raw, "Parisian cafes")
    assert not right(raw, "London")


@pytest.mark.parametrize(("text", "ok"), [
    ("B", True), ("(B)", True), ("Answer: B", True), ("the answer is B.", True),
    ("The correct answer is (B) Jupiter", True), ("Jupiter", True), ("B) Jupiter", True),
    ("A good guess: Jupiter", True),  # "A" the article, then the choice's text
    ("I think B", True),  # "I" the pronoun, not a label
    ("Answer: C, not B", False), ("A", False), ("Mars", False), ("Bob says hi", False),
    ("Mars or Jupiter", False),  # two choices' texts: no pick
    ("", False),
])
def test_choice_extraction(text: str, ok: bool) -> None:
    raw = {"kind": "choice", "choices": ["Mars", "Jupiter", "Venus"], "answer": "B"}
    assert right(raw, text) is ok
    assert right({**raw, "answer": 1}, text) is ok


def test_choice_after_cue_wins_over_an_earlier_label() -> None:
    raw = {"kind": "choice", "choices": ["x", "y", "z"], "answer": "C"}
    assert right(raw, "A and B are wrong, so the answer is C")
    assert not right(raw, "C is tempting but the answer is A")


@pytest.mark.parametrize(("text", "ok"), [
    ("1234", True), ("The total is 1,234.", True), ("about 1234.4 km", True),
    ("1234 apples, I think, then 1000", False), ("12345", False), ("none", False),
    ("v1234 is -1234", False),
])
def test_numeric_takes_the_last_number(text: str, ok: bool) -> None:
    raw = {"kind": "numeric", "value": 1234, "tolerance": 0.5}
    assert right(raw, text) is ok


def test_numeric_relative_tolerance_and_signs() -> None:
    raw = {"kind": "numeric", "value": -200, "tolerance": {"rel": 0.01}}
    assert right(raw, "x = -201.9")
    assert not right(raw, "x = -203")
    assert not right(raw, "x = 200")
    assert right({"kind": "numeric", "value": 0.002}, "2e-3")


def test_regex_searches_with_flags() -> None:
    raw = {"kind": "regex", "pattern": r"^\d{3}-\d{4}$", "flags": "m"}
    assert right(raw, "call\n555-1234\nnow")
    assert not right(raw, "555-12345")
    assert right({"kind": "regex", "pattern": "yes", "flags": "i"}, "YES")


SCHEMA = {"type": "object", "required": ["name", "age"], "additionalProperties": False,
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                         "tags": {"type": "array", "items": {"enum": ["a", "b"]}}}}


@pytest.mark.parametrize(("text", "ok"), [
    ('{"name": "Ann", "age": 3}', True),
    ('Sure:\n```json\n{"name": "Ann", "age": 3, "tags": ["a"]}\n```', True),
    ('Here it is: {"name": "Ann", "age": 3.0} done', True),
    ('{"name": "Ann"}', False), ('{"name": "Ann", "age": "3"}', False),
    ('{"name": "Ann", "age": true}', False), ('{"name": "Ann", "age": 3, "x": 1}', False),
    ('{"name": "Ann", "age": 3, "tags": ["c"]}', False), ("no json here", False),
    ("[1, 2]", False),
])
def test_json_schema(text: str, ok: bool) -> None:
    assert right({"kind": "json_schema", "schema": SCHEMA}, text) is ok


def test_json_schema_whole_vocabulary() -> None:
    schema = {"type": "object", "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
              "properties": {"n": {"type": "integer", "minimum": 1},
                             "c": {"$ref": "#/$defs/code"},
                             "v": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}
    raw = {"kind": "json_schema", "schema": schema}
    assert right(raw, '{"n": 1, "c": "FRA", "v": 2}')
    assert not right(raw, '{"n": 0}')
    assert not right(raw, '{"c": "fr"}')
    assert not right(raw, '{"v": 1.5}')


@pytest.mark.parametrize(("raw", "field"), [
    ([], "(reference)"), ({"kind": "fuzzy"}, "kind"),
    ({"kind": "exact", "answers": []}, "answers"),
    ({"kind": "exact", "answers": ["x"], "normalise": "yes"}, "normalise"),
    ({"kind": "contains", "answers": ["x"], "normalise": True}, "normalise"),
    ({"kind": "choice", "choices": ["x", "y"], "answer": "C"}, "answer"),
    ({"kind": "choice", "choices": ["x", "y"], "answer": 2}, "answer"),
    ({"kind": "numeric", "value": "12"}, "value"),
    ({"kind": "numeric", "value": 1, "tolerance": -1}, "tolerance"),
    ({"kind": "numeric", "value": 1, "tolerance": {"abs": 1, "pct": 2}}, "tolerance.pct"),
    ({"kind": "regex", "pattern": "(unclosed"}, "pattern"),
    ({"kind": "regex", "pattern": "x", "flags": "g"}, "flags"),
    ({"kind": "json_schema", "schema": {"type": "thing"}}, "schema.type"),
    ({"kind": "json_schema", "schema": {"properties": {"a": {"minimum": "x"}}}},
     "schema.properties.a.minimum"),
    ({"kind": "json_schema", "schema": {"items": {"$ref": "https://example.com/s.json"}}},
     "schema.items.$ref"),
    ({"kind": "json_schema", "schema": True}, "schema"),
    ({"kind": "command", "argv": []}, "argv"),
    ({"kind": "command", "argv": ["true"], "file": "../x"}, "file"),
    ({"kind": "command", "argv": ["true"], "files": {"a/b": "x"}}, "files.a/b"),
    ({"kind": "command", "argv": ["true"], "timeout_s": 0}, "timeout_s"),
])
def test_bad_references_name_the_field(raw: object, field: str) -> None:
    with pytest.raises(BadReference) as caught:
        parse_reference(raw)
    assert caught.value.field == field


def test_read_traffic_names_the_reference_field(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    record = {"id": "r1", "offset_s": 0, "scenario": "s", "endpoint": "/v1/completions",
              "body": {"prompt": "x"}, "reference": {"kind": "regex", "pattern": "[a"}}
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(TrafficError) as caught:
        read_traffic(path)
    assert caught.value.field == "reference.pattern"
    assert "t.jsonl:1" in str(caught.value)


CHECK = "import sys; sys.exit(0 if open('answer.py').read().strip() == sys.stdin.read().strip() " \
        "and eval(open('answer.py').read()) == 4 else 1)"


def test_command_runs_only_when_allowed() -> None:
    raw = {"kind": "command", "argv": [sys.executable, "check.py"], "file": "answer.py",
           "files": {"check.py": CHECK}}
    with pytest.raises(CommandsDisabled):
        right(raw, "2 + 2")
    assert right(raw, "2 + 2", allow_commands=True)
    assert not right(raw, "2 + 3", allow_commands=True)


def test_command_sandbox_limits_time_and_environment() -> None:
    slow = {"kind": "command", "argv": [sys.executable, "-c", "import time; time.sleep(30)"],
            "timeout_s": 0.5}
    assert not right(slow, "", allow_commands=True)
    env = {"kind": "command", "argv": [sys.executable, "-c",
           "import os, sys; sys.exit(0 if os.getcwd() == os.environ['HOME'] and "
           "'SECRET_FOR_TEST' not in os.environ and "
           "os.environ['https_proxy'].endswith(':9') else 1)"]}
    os.environ["SECRET_FOR_TEST"] = "1"
    try:
        assert right(env, "", allow_commands=True)
    finally:
        del os.environ["SECRET_FOR_TEST"]
    hog = {"kind": "command", "memory_mb": 256,
           "argv": [sys.executable, "-c", "x = bytearray(512 * 1024 * 1024)"]}
    assert not right(hog, "", allow_commands=True)
    assert right({**hog, "memory_mb": 2048}, "", allow_commands=True)  # the limit, not python


def test_formats_md_examples_parse_one_per_kind() -> None:
    from layergate.exporters.references import KINDS

    text = (Path(__file__).resolve().parents[1] / "docs" / "FORMATS.md").read_text()
    section = text.split("## References", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    kinds = [parse_reference(json.loads(line)["reference"]).kind
             for line in section.strip().splitlines()]
    assert kinds == list(KINDS)
