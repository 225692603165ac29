"""Azure LLM inference traces (the 2023 conversation and code traces, the 2024 week-long
files): CSV with `TIMESTAMP` (a date-time), `ContextTokens`, `GeneratedTokens`."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterator
from pathlib import Path

from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import LengthRow
from layergate.harness.traces.source import TraceError, csv_rows, whole

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
# 2023-11-16 18:15:46.6805900, 2024-05-10 00:00:00.009930+00:00, ...T...Z
_DATETIME = re.compile(r"\s*(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):(\d\d)(\.\d+)?\s*"
                       r"(Z|[+-]\d\d:?\d\d)?\s*")


def _looks_like(line: str) -> bool:
    return all(c in line for c in COLUMNS)


@trace_format("azure", length_only=True, timed=True, time_field="TIMESTAMP",
              looks_like=_looks_like,
              summary="CSV: TIMESTAMP (date-time), ContextTokens, GeneratedTokens")
def read(path: Path, context: ReadContext) -> Iterator[LengthRow | TraceError]:
    for line, row in csv_rows(path, COLUMNS):
        if isinstance(row, TraceError):
            yield row
            continue
        try:
            yield LengthRow(line, timestamp(row["TIMESTAMP"], path, line),
                            whole(row["ContextTokens"], path, line, "ContextTokens", low=1),
                            whole(row["GeneratedTokens"], path, line, "GeneratedTokens"))
        except TraceError as exc:
            yield exc


def timestamp(text: str, path: Path, line: int) -> float:
    """Seconds since the epoch (UTC when the text names no offset)."""
    m = _DATETIME.fullmatch(text)
    if m is None:
        raise TraceError(path, line, "TIMESTAMP", f"must be a date-time like "
                                                  f"2023-11-16 18:15:46.68: {text!r}")
    day, hours, minutes, secs, frac, zone = m.groups()
    try:
        start = _day_start(day)
    except ValueError as exc:
        raise TraceError(path, line, "TIMESTAMP", f"{exc}: {text!r}") from None
    value = start + int(hours) * 3600 + int(minutes) * 60 + int(secs) + float(frac or 0)
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        value -= sign * (int(zone[1:3]) * 3600 + int(zone[-2:]) * 60)
    return value


@functools.lru_cache(maxsize=64)
def _day_start(day: str) -> float:
    return dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp()
