"""BurstGPT (Azure OpenAI GPT traffic of a campus service): CSV with `Timestamp` (s),
`Model`, `Request tokens`, `Response tokens`, `Total tokens`, `Log Type`. A response that
failed is recorded with 0 response tokens: such rows are left out and counted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import LengthRow, Skipped
from layergate.harness.traces.source import TraceError, csv_rows, seconds, whole

COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens",
           "Log Type")
FAILED = "failed"  # the key of these rows in the import report


def _looks_like(line: str) -> bool:
    return "Request tokens" in line and "Response tokens" in line


@trace_format("burstgpt", length_only=True, timed=True, time_field="Timestamp",
              looks_like=_looks_like,
              summary="CSV: Timestamp (s), Model, Request tokens, Response tokens, "
                      "Total tokens, Log Type")
def read(path: Path, context: ReadContext) -> Iterator[LengthRow | Skipped | TraceError]:
    for line, row in csv_rows(path, COLUMNS):
        if isinstance(row, TraceError):
            yield row
            continue
        try:
            at = seconds(row["Timestamp"], path, line, "Timestamp")
            n = whole(row["Request tokens"], path, line, "Request tokens", low=1)
            out = whole(row["Response tokens"], path, line, "Response tokens")
        except TraceError as exc:
            yield exc
            continue
        yield Skipped(line, FAILED) if out == 0 else LengthRow(line, at, n, out)
