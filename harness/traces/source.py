"""Reading a trace file row by row: JSON lines, a JSON array, CSV with named columns, and the
checked numbers in them. Every problem is a `TraceError` naming the file, the line and the
field, yielded in place of the row, so a reader can go on past it (`--skip-bad`)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from layergate.exporters.traffic import TrafficError

Row = tuple[int, Any]  # (line number, the decoded row) or (line number, TraceError)


class TraceError(TrafficError):
    """A trace row (or file) that does not follow its format; says where and which field."""


def open_text(path: Path):
    try:
        return path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise TraceError(path, 0, "(file)", f"cannot read: {exc.strerror or exc}") from exc


def first_line(path: Path) -> str:
    """The first non-blank line (for sniffing the format); '' for an empty file."""
    with open_text(path) as fh:
        try:
            for text in fh:
                if text.strip():
                    return text.strip()
        except UnicodeDecodeError as exc:
            raise TraceError(path, 0, "(file)", f"not UTF-8: {exc}") from exc
    return ""


def json_lines(path: Path) -> Iterator[Row]:
    """(line, object) per non-blank line; a line that is not a JSON object is a TraceError."""
    with open_text(path) as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                yield number, TraceError(path, number, "(line)", f"invalid JSON: {exc.msg} at "
                                                                 f"column {exc.colno}")
                continue
            if not isinstance(obj, dict):
                yield number, TraceError(path, number, "(line)", "must be a JSON object, got "
                                                                 f"{type(obj).__name__}")
                continue
            yield number, obj


def json_array(path: Path) -> Iterator[Row]:
    """(line where the element starts, element) of a file holding one JSON array."""
    with open_text(path) as fh:
        text = fh.read()
    decoder, line, last = json.JSONDecoder(), 1, 0
    pos = _skip(text, 0)
    if not text.startswith("[", pos):
        raise TraceError(path, 1, "(file)", "must be a JSON array ([{...}, ...])")
    pos = _skip(text, pos + 1)
    while not text.startswith("]", pos):
        try:
            item, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise TraceError(path, exc.lineno, "(file)", f"invalid JSON: {exc.msg} at column "
                                                         f"{exc.colno}") from exc
        line, last = line + text.count("\n", last, pos), pos
        yield line, item
        pos = _skip(text, end)
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
        elif not text.startswith("]", pos):
            line += text.count("\n", last, pos)
            raise TraceError(path, line, "(file)", "expected ',' or ']' after an element")


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def csv_rows(path: Path, columns: tuple[str, ...]) -> Iterator[Row]:
    """(line, {column: text}) of a CSV file whose header holds `columns` (others ignored)."""
    with open_text(path) as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            raise TraceError(path, 1, "(header)", "empty file: expected a CSV header")
        header = [h.strip() for h in header]
        missing = [c for c in columns if c not in header]
        if missing:
            raise TraceError(path, 1, missing[0], f"missing column (the header has "
                                                  f"{', '.join(header)})")
        index = [header.index(c) for c in columns]
        width = max(index) + 1
        for cells in reader:
            number = reader.line_num
            if not cells or not any(c.strip() for c in cells):
                continue
            if len(cells) < width:
                yield number, TraceError(path, number, columns[
                    next(i for i, at in enumerate(index) if at >= len(cells))],
                    f"missing: the row has {len(cells)} cells, the header {len(header)}")
                continue
            yield number, {c: cells[i] for c, i in zip(columns, index, strict=True)}


def whole(value: Any, path: Path, line: int, field: str, low: int = 0) -> int:
    """An integer >= `low`, from a JSON number or a CSV cell ('12', '12.0')."""
    if type(value) is int and value >= low:  # the common cases first: a trace has millions
        return value
    if isinstance(value, str) and value.isdigit() and int(value) >= low:
        return int(value)
    number = value
    if isinstance(value, str):
        try:
            number = float(value) if "." in value or "e" in value.lower() else int(value)
        except ValueError:
            raise TraceError(path, line, field, f"must be a whole number: {value!r}") from None
    if isinstance(number, bool) or not isinstance(number, int | float) or (
            isinstance(number, float) and not number.is_integer()):
        raise TraceError(path, line, field, f"must be a whole number: {value!r}")
    if number < low:
        raise TraceError(path, line, field, f"must be >= {low}: {value!r}")
    return int(number)


def seconds(value: Any, path: Path, line: int, field: str) -> float:
    """A finite number >= 0 (a JSON number or a CSV cell)."""
    number = value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise TraceError(path, line, field, f"must be a number: {value!r}") from None
    if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(
            number) or number < 0:
        raise TraceError(path, line, field, f"must be a finite number >= 0: {value!r}")
    return float(number)
