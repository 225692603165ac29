"""What a load tool's output is read into: one `ImportedRequest` per request it sent, and
the `ImportedRun` around them with the settings the comparability check compares. A field
the tool did not record is None (or empty), never made up; `not_recorded` says so in words."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from layergate.exporters.catalogue import IMPORT_SETTINGS
from layergate.exporters.errors import UsageError

COMPARED = IMPORT_SETTINGS  # compared between arms before any verdict (comparable.py)
SERVER_USAGE, TOOL_TOKENIZER = "server usage", "the tool's tokenizer"


class ResultsError(UsageError, ValueError):
    """A tool's output that cannot be read as that tool writes it (names the file and the
    field), or an import that cannot be made (names the arm or the setting)."""


@dataclass(frozen=True)
class ImportedRequest:
    """One request as the tool recorded it; times in seconds from the tool's send."""

    prompt_key: str | None  # identity of the prompt (text digest, or the tool's own id)
    ok: bool
    error: str | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: tuple[float, ...] = ()  # gaps between streamed chunks after the first
    output_tokens: int = 0
    prompt_tokens: int = 0
    output_text: str = ""
    text_saved: bool = False  # whether the tool kept the output text at all
    send_lag_s: float | None = None  # the tool's send minus its scheduled time
    max_tokens: int | None = None
    tokens_from: str | None = None  # catalogue TOKEN_SOURCES: usage or tokenizer


@dataclass(frozen=True)
class ImportedRun:
    """One run of one tool, as read from its output."""

    tool: str
    version: str | None
    source: str  # the file read
    target: str | None  # the server the tool sent to, where it recorded it
    requests: tuple[ImportedRequest, ...]
    settings: dict[str, str | None]  # COMPARED -> value in words (None: not recorded)
    prompts_from: str  # how prompt_key was made: "text", a tool's generator id, or "none"
    not_recorded: tuple[str, ...] = ()  # what the tool did not write, in words
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        unknown = set(self.settings) - set(COMPARED)
        if unknown:
            raise ValueError(f"{self.tool}: settings {sorted(unknown)} are not compared ones")


def text_key(text: str) -> str:
    """The identity of a prompt given as text."""
    return "t" + hashlib.sha256(text.encode()).hexdigest()[:24]


def generated_key(generator: str, index: str) -> str:
    """The identity of a prompt the tool generated: its generator's settings (seeded) and
    the tool's own index of the prompt."""
    return "g" + hashlib.sha256(f"{generator}\0{index}".encode()).hexdigest()[:24]


def prompts_digest(keys: list[str | None]) -> str | None:
    """The multiset of a run's prompts, as one value to compare (None: not recorded)."""
    if not keys or any(k is None for k in keys):
        return None
    return hashlib.sha256("\n".join(sorted(k for k in keys if k)).encode()).hexdigest()[:16]


def one_setting(values: list[Any]) -> str | None:
    """The one value every request had, in words, or all of them ("mixed: ..."); None
    when none recorded it."""
    found = sorted({json.dumps(v) for v in values})
    if not found or found == ["null"]:
        return None
    return words(json.loads(found[0])) if len(found) == 1 else "mixed: " + ", ".join(found)


def words(value: object) -> str | None:
    """A setting in words; None stays None (not recorded)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
