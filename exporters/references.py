"""What a right answer is: a traffic record's optional `reference` (docs/FORMATS.md,
"References") and the scorer that holds an output to it. `exporters`, the bottom layer,
owns it because the traffic reader validates it and the figures score with it.

A reference is a JSON object with one `kind`, each with its own fields:
- `exact`: `answers` (strings); right when the stripped output equals one, or with
  `"normalise": true` when SQuAD-normalised they are equal (`answers.normalise`).
- `contains`: `answers`; right when one appears, normalised, as whole words in the output.
- `choice`: `choices` (strings, labelled A, B, ...) and `answer` (a label or a 0-based
  index); right when the choice read from the output (`answers.extract_choice`) is it.
- `numeric`: `value` and an optional `tolerance` (absolute: a number; or `{"abs", "rel"}`);
  right when the output's last number is within max(abs, rel × |value|) of it.
- `regex`: `pattern` (Python `re`) and optional `flags` (of "imsx"); right when it is found
  in the output (`re.search`: anchor it for a whole match).
- `json_schema`: `schema` (any JSON Schema, checked by `schemas.py`); right when the
  output's JSON (`answers.extract_json`) satisfies it.
- `command`: `argv`, optional `file`, `files`, `timeout_s`, `memory_mb`; right when the
  command exits 0 on the output (`sandbox.py`). Scored only with `allow_commands=True`.
- `judge`: optional `answers` and `criteria` (text) for the judge's prompt; right when an
  LLM judge said so (`layergate judge`, its verdicts in the run's judgements.jsonl), so
  `score` cannot decide it alone (`NeedsJudge`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from layergate.exporters import answer_extraction as extract
from layergate.exporters import sandbox
from layergate.exporters.errors import UsageError

KINDS = ("exact", "contains", "choice", "numeric", "regex", "json_schema", "command",
         "judge")
_FIELDS = {"exact": ("answers", "normalise"), "contains": ("answers",),
           "choice": ("choices", "answer"), "numeric": ("value", "tolerance"),
           "regex": ("pattern", "flags"), "json_schema": ("schema",),
           "command": ("argv", "file", "files", "timeout_s", "memory_mb"),
           "judge": ("answers", "criteria")}
FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


class BadReference(UsageError, ValueError):
    """A reference that is not one of the kinds; `field` names the bad part."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


class NeedsJudge(UsageError, RuntimeError):
    """A `judge` reference scored without a judge's verdict."""


class CommandsDisabled(UsageError, RuntimeError):
    """A `command` reference scored without `allow_commands=True`."""


@dataclass(frozen=True)
class Reference:
    kind: str
    answers: tuple[str, ...] = ()  # exact, contains
    normalise: bool = False  # exact
    choices: tuple[str, ...] = ()  # choice
    correct: int = -1  # choice: the right choice's index
    value: float = 0.0  # numeric
    abs_tol: float = 0.0
    rel_tol: float = 0.0
    pattern: re.Pattern | None = None  # regex
    schema: Mapping[str, Any] = field(default_factory=dict)  # json_schema
    argv: tuple[str, ...] = ()  # command
    file: str = "output.txt"
    files: Mapping[str, str] = field(default_factory=dict)
    limits: sandbox.Limits = sandbox.Limits()
    criteria: str = ""  # judge


def parse_reference(raw: Any) -> Reference:
    """The reference `raw` describes; raises BadReference naming the first bad field."""
    if not isinstance(raw, Mapping):
        raise BadReference("(reference)", f"must be an object, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise BadReference("kind", f"must be one of {', '.join(KINDS)}: {kind!r}")
    unknown = sorted(set(raw) - {"kind", *_FIELDS[kind]})
    if unknown:
        raise BadReference(unknown[0], f"unknown field for kind {kind} (allowed: "
                                       f"{', '.join(_FIELDS[kind])})")
    return _PARSERS[kind](raw)


def _strings(raw: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = raw.get(name)
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise BadReference(name, f"must be a non-empty list of strings: {value!r}")
    return tuple(value)


def _number(value: Any, name: str, low: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
            value) or (low is not None and value < low):
        bound = f" >= {low:g}" if low is not None else ""
        raise BadReference(name, f"must be a finite number{bound}: {value!r}")
    return float(value)


def _answers(raw: Mapping[str, Any]) -> Reference:
    normalise = raw.get("normalise", False)
    if not isinstance(normalise, bool):
        raise BadReference("normalise", f"must be true or false: {normalise!r}")
    return Reference(raw["kind"], _strings(raw, "answers"), normalise=normalise)


def _choice(raw: Mapping[str, Any]) -> Reference:
    choices = _strings(raw, "choices")
    labels = extract.labels(len(choices))
    if len(choices) > 26:
        raise BadReference("choices", f"at most 26 (labels A to Z): {len(choices)}")
    answer = raw.get("answer")
    if isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(choices):
        correct = answer
    elif isinstance(answer, str) and answer.strip().strip("()").upper() in labels:
        correct = labels.index(answer.strip().strip("()").upper())
    else:
        raise BadReference("answer", f"must be a label ({', '.join(labels)}) or a 0-based "
                                     f"index below {len(choices)}: {answer!r}")
    return Reference("choice", choices=choices, correct=correct)


def _numeric(raw: Mapping[str, Any]) -> Reference:
    value = _number(raw.get("value"), "value")
    tolerance = raw.get("tolerance", 0)
    if isinstance(tolerance, Mapping):
        extra = sorted(set(tolerance) - {"abs", "rel"})
        if extra:
            raise BadReference(f"tolerance.{extra[0]}", "unknown (allowed: abs, rel)")
        abs_tol = _number(tolerance.get("abs", 0), "tolerance.abs", 0)
        rel_tol = _number(tolerance.get("rel", 0), "tolerance.rel", 0)
    else:
        abs_tol, rel_tol = _number(tolerance, "tolerance", 0), 0.0
    return Reference("numeric", value=value, abs_tol=abs_tol, rel_tol=rel_tol)


def _regex(raw: Mapping[str, Any]) -> Reference:
    pattern, flags = raw.get("pattern"), raw.get("flags", "")
    if not isinstance(pattern, str) or not pattern:
        raise BadReference("pattern", f"must be a non-empty string: {pattern!r}")
    if not isinstance(flags, str) or set(flags) - set(FLAGS):
        raise BadReference("flags", f"must be letters of {''.join(FLAGS)}: {flags!r}")
    bits = 0
    for letter in flags:
        bits |= FLAGS[letter]
    try:
        compiled = re.compile(pattern, bits)
    except re.error as exc:
        raise BadReference("pattern", f"not a valid regular expression ({exc}): "
                                      f"{pattern!r}") from None
    return Reference("regex", pattern=compiled)


def _json_schema(raw: Mapping[str, Any]) -> Reference:
    if not isinstance(raw.get("schema"), Mapping):  # true / false would decide nothing
        raise BadReference("schema", f"must be an object (a JSON Schema): {raw.get('schema')!r}")
    from layergate.exporters import schemas  # jsonschema: loaded for a schema only

    try:
        schemas.check_schema(raw.get("schema"))
    except schemas.SchemaError as exc:
        raise BadReference(exc.path, exc.message) from None
    return Reference("json_schema", schema=raw["schema"])


def _name(value: Any, where: str) -> str:
    """A plain file name: no directory part, so nothing is written outside the sandbox."""
    if not isinstance(value, str) or not value or PurePosixPath(value).name != value or \
            value in (".", ".."):
        raise BadReference(where, f"must be a plain file name: {value!r}")
    return value


def _command(raw: Mapping[str, Any]) -> Reference:
    argv = _strings(raw, "argv")
    file = _name(raw.get("file", "output.txt"), "file")
    files = raw.get("files", {})
    if not isinstance(files, Mapping):
        raise BadReference("files", "must be an object of file name to text")
    for name, text in files.items():
        _name(name, f"files.{name}")
        if not isinstance(text, str):
            raise BadReference(f"files.{name}", "must be a string (the file's text)")
    if file in files:
        raise BadReference("file", f"{file!r} is also in files: the output would replace it")
    timeout = _number(raw.get("timeout_s", 10), "timeout_s", 0)
    memory = raw.get("memory_mb", 1024)
    if isinstance(memory, bool) or not isinstance(memory, int) or memory < 16:
        raise BadReference("memory_mb", f"must be a whole number >= 16: {memory!r}")
    if timeout == 0:
        raise BadReference("timeout_s", "must be > 0")
    return Reference("command", argv=argv, file=file, files=dict(files),
                     limits=sandbox.Limits(timeout_s=timeout, memory_mb=memory))


def _judge(raw: Mapping[str, Any]) -> Reference:
    answers = _strings(raw, "answers") if "answers" in raw else ()
    criteria = raw.get("criteria", "")
    if not isinstance(criteria, str):
        raise BadReference("criteria", f"must be a string: {criteria!r}")
    return Reference("judge", answers, criteria=criteria)


_PARSERS = {"exact": _answers, "contains": _answers, "choice": _choice, "numeric": _numeric,
            "regex": _regex, "json_schema": _json_schema, "command": _command, "judge": _judge}


def score(reference: Reference, text: str, *, allow_commands: bool = False) -> bool:
    """Whether `text` (an arm's whole output) is right by `reference`. A `command`
    reference runs its command (sandbox.py) only with `allow_commands=True`, else raises
    CommandsDisabled."""
    kind = reference.kind
    if kind == "exact":
        if reference.normalise:
            return extract.normalise(text) in {extract.normalise(a) for a in reference.answers}
        return text.strip() in reference.answers
    if kind == "contains":
        return any(extract.contains(text, a) for a in reference.answers)
    if kind == "choice":
        return extract.extract_choice(text, reference.choices) == reference.correct
    if kind == "numeric":
        got = extract.extract_number(text)
        return got is not None and abs(got - reference.value) <= max(
            reference.abs_tol, reference.rel_tol * abs(reference.value))
    if kind == "regex":
        return reference.pattern is not None and reference.pattern.search(text) is not None
    if kind == "json_schema":
        from layergate.exporters import schemas  # jsonschema: loaded for a schema only

        value = extract.extract_json(text)
        return value is not extract.MISSING and schemas.valid(value, reference.schema)
    if kind == "command":
        if not allow_commands:
            raise CommandsDisabled("a command reference runs a program on the output: it is "
                                   "scored only when commands are allowed explicitly "
                                   "(allow_commands=True)")
        return sandbox.run_command(reference.argv, text, output_file=reference.file,
                                   files=reference.files, limits=reference.limits).passed
    if kind == "judge":
        raise NeedsJudge("a judge reference is right or wrong by a judge's verdict: run "
                         "`layergate judge RUN_DIR` first")
    raise BadReference("kind", f"must be one of {', '.join(KINDS)}: {kind!r}")
