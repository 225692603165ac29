"""What the eval layouts (qa.py, multiple_choice.py, openai_evals.py) share: finding a
field by its usual names or the one `--question-field` / `--answer-field` /
`--choices-field` names, the reference of a free answer (`--answer-kind`), and the chat
request a question becomes. Every reference made is checked by the traffic format's own
parser, so an import never writes one that `read_traffic` would refuse."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from layergate.exporters.answer_extraction import extract_number
from layergate.exporters.references import BadReference, parse_reference
from layergate.exporters.traffic import CHAT
from layergate.harness.traces.formats import ReadContext
from layergate.harness.traces.rows import RequestRow
from layergate.harness.traces.source import TraceError, json_lines

QUESTION = ("question", "prompt", "input", "problem", "query")
ANSWER = ("answer", "answers", "target", "targets", "label", "ideal")
CHOICES = ("choices", "options")


def pick(obj: dict, named: str | None, usual: Sequence[str], path: Path, line: int,
         what: str) -> tuple[str, Any]:
    """(field, value) of the field `named`, else of the first usual name present."""
    names = (named,) if named else usual
    for name in names:
        if name in obj:
            return name, obj[name]
    told = f"--{what}-field" if named else f"one of {', '.join(usual)} (or --{what}-field)"
    raise TraceError(path, line, names[0], f"missing: the {what} field, {told}")


def question(obj: dict, named: str | None, path: Path, line: int) -> str:
    """The row's question (the field `named`, else the first usual name): non-empty text."""
    name, value = pick(obj, named, QUESTION, path, line, "question")
    if not isinstance(value, str) or not value.strip():
        raise TraceError(path, line, name, f"must be a non-empty string: {value!r}")
    return value


def checked(reference: dict[str, Any], path: Path, line: int, where: str) -> dict[str, Any]:
    try:
        parse_reference(reference)
    except BadReference as exc:
        raise TraceError(path, line, where, f"reference {exc.field}: {exc.message}") from None
    return reference


def free_answer(value: Any, kind: str, path: Path, line: int, where: str) -> dict[str, Any]:
    """The reference of a free answer `value` (a string or a list of them; a number for
    numeric, whose answer may be text ending in it, as GSM8K's "... #### 72")."""
    answers = value if isinstance(value, list) else [value]
    if kind == "numeric":
        number = answers[0] if len(answers) == 1 else None
        if isinstance(number, str):
            number = extract_number(number)
        if isinstance(number, bool) or not isinstance(number, int | float):
            raise TraceError(path, line, where, f"numeric answers need one number: {value!r}")
        return checked({"kind": "numeric", "value": number}, path, line, where)
    answers = [str(a) if isinstance(a, int | float) and not isinstance(a, bool) else a
               for a in answers]
    if not answers or not all(isinstance(a, str) and a.strip() for a in answers):
        raise TraceError(path, line, where, f"must be a non-empty string or list of them: "
                                            f"{value!r}")
    reference: dict[str, Any] = {"kind": kind, "answers": answers}
    if kind == "exact":
        reference["normalise"] = True
    return checked(reference, path, line, where)


def chat_row(fmt: str, line: int, messages: list[dict[str, Any]], reference: dict[str, Any],
             context: ReadContext) -> RequestRow:
    body = {"messages": messages, "max_tokens": context.evals.answer_tokens, "temperature": 0}
    return RequestRow(line, f"{fmt}-{line}", CHAT, body, reference=reference)


def read_rows(path: Path, make: Callable[[dict, int], RequestRow]
              ) -> Iterator[RequestRow | TraceError]:
    """`make(obj, line)` per JSON line, a TraceError (bad JSON, or raised by `make`) in
    place of the row."""
    for line, obj in json_lines(path):
        if isinstance(obj, TraceError):
            yield obj
            continue
        try:
            yield make(obj, line)
        except TraceError as exc:
            yield exc
