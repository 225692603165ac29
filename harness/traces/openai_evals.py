"""OpenAI evals samples: JSON lines `{"input": [messages] or "text", "ideal": "..." or
[...]}` (the layout of openai/evals' registry/data). The messages are sent as they are
(a string is one user message); `ideal` becomes the reference, of `--answer-kind` (exact,
normalised, by default)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from layergate.exporters.traffic import TrafficError, parse_record
from layergate.harness.traces import evals
from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import RequestRow
from layergate.harness.traces.source import TraceError


def _looks_like(head: str) -> bool:
    return '"input"' in head and '"ideal"' in head


@trace_format("openai-evals", length_only=False, timed=False, looks_like=_looks_like,
              references=True, summary='JSONL: input ([messages] or text), ideal')
def read(path: Path, context: ReadContext) -> Iterator[RequestRow | TraceError]:
    options = context.evals

    def make(obj: dict, line: int) -> RequestRow:
        name, given = evals.pick(obj, options.question_field, ("input",), path, line,
                                 "question")
        messages = [{"role": "user", "content": given}] if isinstance(given, str) else given
        where, ideal = evals.pick(obj, options.answer_field, ("ideal",), path, line, "answer")
        reference = evals.free_answer(ideal, options.answer_kind, path, line, where)
        row = evals.chat_row("openai-evals", line, messages, reference, context)
        try:  # the traffic format's checks of the messages, on this file's line
            parse_record({"id": row.id, "offset_s": 0, "scenario": "openai-evals",
                          "endpoint": row.endpoint, "body": row.body}, path, line)
        except TrafficError as exc:
            raise TraceError(path, line, f"{name}: {exc.field}", exc.message) from None
        return row

    return evals.read_rows(path, make)
