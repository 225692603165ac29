"""Reading a tool's file: JSON or JSON Lines, every failure naming the file and the field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from layergate.harness.results_import.model import ResultsError


def read_json(path: Path, tool: str) -> Any:
    if not path.is_file():
        raise ResultsError(f"{path}: no such file (expected {tool}'s output)")
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{path}: not readable as {tool}'s JSON ({exc})") from exc


def read_jsonl(path: Path, tool: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ResultsError(f"{path}: no such file (expected {tool}'s output)")
    rows = []
    with path.open() as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ResultsError(f"{path}:{number}: not a JSON line of {tool}'s ({exc})") \
                    from exc
            if not isinstance(row, dict):
                raise ResultsError(f"{path}:{number}: a {type(row).__name__}, not {tool}'s "
                                   "record object")
            rows.append(row)
    return rows


def need(obj: Any, key: str, where: str, kind: type | tuple[type, ...] = object) -> Any:
    """`obj[key]`, which must be of `kind`; else an error naming `where` and the key."""
    if not isinstance(obj, Mapping) or key not in obj:
        raise ResultsError(f"{where}: no field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind in (int, float):
        raise ResultsError(f"{where}: field {key!r} is a {type(value).__name__}")
    return value


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None
