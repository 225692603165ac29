"""What a right answer is: a traffic record's optional `reference` (docs/FORMATS.md,
"References") and the scorer that holds an output to it. `exporters`, the bottom layer,
owns it because the traffic reader validates it and the figures score with it.

A reference is a JSON object with one `kind`:
- `exact`: `{"kind": "exact", "answers": ["Paris", ...]}`, right when the output,
  stripped, equals one of the answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from layergate.exporters.errors import UsageError

KINDS = ("exact",)


class BadReference(UsageError, ValueError):
    """A reference that is not one of the kinds; `field` names the bad part."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


@dataclass(frozen=True)
class Reference:
    kind: str
    answers: tuple[str, ...]


def parse_reference(raw: Any) -> Reference:
    """The reference `raw` describes; raises BadReference naming the first bad field."""
    if not isinstance(raw, Mapping):
        raise BadReference("(reference)", f"must be an object, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in KINDS:
        raise BadReference("kind", f"must be one of {', '.join(KINDS)}: {kind!r}")
    answers = raw.get("answers")
    if (not isinstance(answers, list) or not answers
            or not all(isinstance(a, str) for a in answers)):
        raise BadReference("answers", f"must be a non-empty list of strings: {answers!r}")
    return Reference(kind, tuple(answers))


def score(reference: Reference, text: str) -> bool:
    """Whether `text` (an arm's whole output) is right by `reference`."""
    return text.strip() in reference.answers
