"""Multiple-choice JSON lines: a question, its choices (a list, or an object of label to
text) and the right one (`answer`: a label such as "B", or a 0-based index), by the usual
names of evals.py or `--question-field` / `--choices-field` / `--answer-field`. The
request lists the choices as `A. ...` lines and asks for the letter; the reference is a
`choice` one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from layergate.exporters.answer_extraction import labels
from layergate.harness.traces import evals
from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import RequestRow
from layergate.harness.traces.source import TraceError

ASK = "Answer with the letter of the right choice."


def _looks_like(head: str) -> bool:
    return any(f'"{c}"' in head for c in evals.CHOICES)


def prompt(question: str, choices: list[str]) -> str:
    lines = [f"{label}. {text}" for label, text in zip(labels(len(choices)), choices,
                                                         strict=True)]
    return "\n".join([question.strip(), "", *lines, "", ASK])


def _choices(value: Any, path: Path, line: int, where: str) -> tuple[list[str], list[str]]:
    """(texts, the source's labels): a list is labelled A, B, ...; an object keeps its keys
    (in order) as the labels the answer may name."""
    if isinstance(value, dict):
        keys, texts = [str(k) for k in value], list(value.values())
    elif isinstance(value, list):
        keys, texts = list(labels(len(value))), value
    else:
        raise TraceError(path, line, where, "must be a list of choices or an object of label "
                                            "to choice")
    if len(texts) < 2 or len(texts) > 26 or not all(isinstance(t, str) and t.strip()
                                                   for t in texts):
        raise TraceError(path, line, where, f"must be 2 to 26 non-empty strings: {value!r}")
    return texts, keys


@trace_format("multiple-choice", length_only=False, timed=False, looks_like=_looks_like,
              references=True, summary="JSONL: question, choices, answer (label or index)")
def read(path: Path, context: ReadContext) -> Iterator[RequestRow | TraceError]:
    options = context.evals

    def make(obj: dict, line: int) -> RequestRow:
        question = evals.question(obj, options.question_field, path, line)
        where, raw = evals.pick(obj, options.choices_field, evals.CHOICES, path, line,
                                "choices")
        texts, keys = _choices(raw, path, line, where)
        at, answer = evals.pick(obj, options.answer_field, evals.ANSWER, path, line, "answer")
        if isinstance(answer, str) and answer.strip().strip("()") in keys:
            answer = keys.index(answer.strip().strip("()"))
        reference = evals.checked({"kind": "choice", "choices": texts, "answer": answer},
                                  path, line, at)
        return evals.chat_row("multiple-choice", line,
                              [{"role": "user", "content": prompt(question, texts)}],
                              reference, context)

    return evals.read_rows(path, make)
