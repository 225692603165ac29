"""Reading an answer out of a model's free text: SQuAD's normalisation, the chosen label of
a multiple-choice question, the last number, the first JSON value. The scorers
(`references.py`) hold these to a reference; each rule is in docs/FORMATS.md, "References"."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Sequence
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise(text: str) -> str:
    """SQuAD's answer normalisation: lower case, punctuation and the articles a / an / the
    removed, whitespace collapsed."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains(text: str, answer: str) -> bool:
    """Whether normalised `answer` appears in normalised `text` as whole words."""
    needle = normalise(answer)
    return bool(needle) and f" {needle} " in f" {normalise(text)} "


def labels(n: int) -> tuple[str, ...]:
    """The labels of `n` choices: A, B, C, ..."""
    return tuple(string.ascii_uppercase[:n])


# a label standing alone: "B", "(B)", "B)", "B." but not the B of "Bob" or "B2"
_LABEL = r"\(?([A-Z])\)?(?![A-Za-z0-9])"
_CUE = re.compile(r"(?i:\banswer\b)(?:\s*(?i:is|=|:|-))*\s*(?i:option\s+|choice\s+)?")
_STANDALONE = re.compile(r"(?<![A-Za-z0-9])" + _LABEL)


def extract_choice(text: str, choices: Sequence[str]) -> int | None:
    """The index of the choice `text` picks, or None. In order: the first valid label right
    after an answer cue ("Answer: B", "the answer is (B)"); the choice whose text the whole
    output is (normalised); the first standalone valid label ("B", "(B) Paris"; a bare "A"
    or "I" followed by a lower-case word is taken for the English word); the one
    choice whose text the output contains, when exactly one does."""
    valid = labels(len(choices))
    for cue in _CUE.finditer(text):
        found = re.match(_LABEL, text[cue.end():])
        if found and found.group(1) in valid:
            return valid.index(found.group(1))
    whole = normalise(text)
    for i, choice in enumerate(choices):
        if normalise(choice) == whole:
            return i
    for found in _STANDALONE.finditer(text):
        if found.group(1) in valid and not _word(text, found):
            return valid.index(found.group(1))
    hits = [i for i, choice in enumerate(choices) if contains(text, choice)]
    return hits[0] if len(hits) == 1 else None


def _word(text: str, found: re.Match) -> bool:
    """Whether a bare "A" or "I" is the English word ("A good guess", "I think")."""
    return (found.group(0) in ("A", "I")
            and re.match(r"\s+[a-z]", text[found.end():]) is not None)


# a number not glued to a word or another number: "-3", "1,234.5", "2e-3", ".5"; a unit
# may follow ("42 km", "42kg", "30%")
_NUMBER = re.compile(r"(?<![\w.,])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?"
                     r"(?:(?<=\d)[eE][-+]?\d+)?")


def extract_number(text: str) -> float | None:
    """The last number in `text` (thousands commas dropped), or None."""
    last = None
    for found in _NUMBER.finditer(text):
        token = found.group(0)
        if any(c.isdigit() for c in token):
            last = token
    return None if last is None else float(last.replace(",", ""))


_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n(.*?)```", re.DOTALL)
_MISSING = object()


def extract_json(text: str) -> Any:
    """The JSON value `text` holds, in order: the whole text; the first fenced code block
    that parses; the first `{...}` object that parses. `MISSING` when none does."""
    for candidate in (text, *(m.group(1) for m in _FENCE.finditer(text))):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    for start in (i for i, c in enumerate(text) if c == "{"):
        try:
            return decoder.raw_decode(text, start)[0]
        except ValueError:
            continue
    return _MISSING


MISSING = _MISSING
