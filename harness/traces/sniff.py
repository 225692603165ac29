"""Which format a trace file is in, from its head: a wrong `--format` is an error naming the
format the file looks like, before any row is read."""

from __future__ import annotations

from pathlib import Path

from layergate.harness.traces import formats
from layergate.harness.traces.source import TraceError, open_text

HEAD_CHARS = 4096
TRAFFIC = "layergate traffic"  # already layergate's own format


def head(path: Path) -> str:
    with open_text(path) as fh:
        try:
            return fh.read(HEAD_CHARS)
        except UnicodeDecodeError as exc:
            raise TraceError(path, 0, "(file)", f"not UTF-8: {exc}") from exc


def looks_like(text: str) -> str | None:
    """The first format whose signature `text` shows, or None."""
    for name in formats.names():
        if formats.get(name).looks_like(text):
            return name
    if '"offset_s"' in text and '"endpoint"' in text:
        return TRAFFIC
    return None


def check_format(path: Path, declared: formats.TraceFormat) -> None:
    """A TraceError when the file does not look like `declared` but like another format."""
    text = head(path)
    if declared.looks_like(text):
        return
    other = looks_like(text)
    if other == TRAFFIC:
        raise TraceError(path, 1, "(format)", "this is already layergate's traffic format: "
                                              "replay it with `replay --traffic`")
    if other is not None:
        raise TraceError(path, 1, "(format)", f"this looks like {other} "
                         f"({formats.get(other).summary}), not {declared.name} "
                         f"({declared.summary}): pass --format {other}")
