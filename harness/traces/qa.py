"""Question / answer JSON lines (`{"question": ..., "answer": ...}`, or prompt / target and
the other usual names of evals.py, or the fields `--question-field` and `--answer-field`
name). The question becomes a one-message chat request; the answer its reference, of
`--answer-kind` (exact, normalised; contains; numeric)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from layergate.harness.traces import evals
from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import RequestRow
from layergate.harness.traces.source import TraceError


def _looks_like(head: str) -> bool:
    return (any(f'"{q}"' in head for q in evals.QUESTION)
            and any(f'"{a}"' in head for a in evals.ANSWER)
            and not any(f'"{c}"' in head for c in evals.CHOICES)
            and '"ideal"' not in head and '"custom_id"' not in head)


@trace_format("qa", length_only=False, timed=False, looks_like=_looks_like, references=True,
              summary="JSONL: question (or prompt, ...), answer (or target, ...)")
def read(path: Path, context: ReadContext) -> Iterator[RequestRow | TraceError]:
    options = context.evals

    def make(obj: dict, line: int) -> RequestRow:
        question = evals.question(obj, options.question_field, path, line)
        where, answer = evals.pick(obj, options.answer_field, evals.ANSWER, path, line,
                                   "answer")
        reference = evals.free_answer(answer, options.answer_kind, path, line, where)
        return evals.chat_row("qa", line, [{"role": "user", "content": question}], reference,
                              context)

    return evals.read_rows(path, make)
