"""The registry of trace formats: each module registers its reader with `@trace_format`;
`get(name)` finds one (an unknown name suggests a close one) and `names()` lists them for
`--format`. `looks_like(head)` lets `sniff` tell which format a file is in."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters.catalogue import did_you_mean

# the modules that register a format, in `--format`'s order
MODULES = ("mooncake", "azure", "burstgpt", "sharegpt", "openai_batch", "openai_evals",
           "multiple_choice", "qa")


@dataclass(frozen=True)
class EvalOptions:
    """Eval layouts (qa, multiple-choice, openai-evals): which fields hold what (None: the
    usual names, `evals.py`), the reference kind of a free answer, the answer's max_tokens."""

    question_field: str | None = None
    answer_field: str | None = None
    choices_field: str | None = None
    answer_kind: str = "exact"
    answer_tokens: int = 64


@dataclass(frozen=True)
class ReadContext:
    """What a reader needs besides the file: mooncake's block size, a token counter (the
    tokenizer's) for formats that carry text, the eval options, openai-batch's output file,
    and where to note what the import report lists."""

    block_size: int
    count: Callable[[str], int]
    evals: EvalOptions = field(default_factory=EvalOptions)
    # openai-batch: the batch's output file, whose response bodies are the recorded answers
    responses: Path | None = None
    # a remark for the import report about no one row: (a `report.ImportTally` list, an id)
    note: Callable[[str, str], None] = lambda _list, _id: None


@dataclass(frozen=True)
class TraceFormat:
    name: str
    read: Callable[[Path, ReadContext], Iterator[Any]]  # rows (rows.py) or TraceErrors
    looks_like: Callable[[str], bool]  # from the head of the file (its first 4 KiB)
    length_only: bool  # prompts are made up to the recorded lengths
    timed: bool  # rows carry timestamps
    summary: str
    time_field: str = ""  # the column or key of the timestamp
    references: bool = False  # rows carry references (docs/FORMATS.md, "References")


_FORMATS: dict[str, TraceFormat] = {}


def trace_format(name: str, *, length_only: bool, timed: bool, looks_like: Callable[[str], bool],
                 summary: str, time_field: str = "", references: bool = False) -> Callable:
    def register(read: Callable) -> Callable:
        if name in _FORMATS:
            raise ValueError(f"trace format {name!r} registered twice")
        _FORMATS[name] = TraceFormat(name, read, looks_like, length_only, timed, summary,
                                     time_field, references)
        return read
    return register


def _load() -> dict[str, TraceFormat]:
    for module in MODULES:
        importlib.import_module(f"layergate.harness.traces.{module}")
    return _FORMATS


def names() -> tuple[str, ...]:
    return tuple(_load())


def get(name: str) -> TraceFormat:
    formats = _load()
    if name not in formats:
        raise ValueError(f"unknown trace format {name!r}{did_you_mean(name, formats)}: "
                         f"one of {', '.join(formats)}")
    return formats[name]
