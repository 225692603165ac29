"""A judge's verdicts, kept beside a run's results (`judgements.jsonl` in the run directory,
docs/FORMATS.md "Judgements"): one JSON object a line, appended as each comes back, so an
interrupted `layergate judge` loses nothing and a rerun asks only what is not there yet.

A line: `request_id`, `arm`, `verdict` (true right, false wrong, null the judge's answer
said neither), `answer` (the judge's words as it sent them), `judge` (its model), `prompt`
(the sha256 of the prompt template) and `output` (the sha256 of the judged output text).
A verdict counts for an output only while both digests still match: a new template or a
rerun arm's new output is judged again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from layergate.exporters.errors import InfrastructureError

FILE = "judgements.jsonl"


class JudgementsError(InfrastructureError, ValueError):
    """An unreadable judgements file, naming it and the line."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Judgement:
    request_id: str
    arm: str
    verdict: bool | None
    answer: str
    judge: str
    prompt: str  # sha256 of the template
    output: str  # sha256 of the judged output

    @property
    def key(self) -> tuple[str, str, str, str]:
        return self.request_id, self.arm, self.prompt, self.output


def read_judgements(path: Path) -> list[Judgement]:
    """Every judgement in `path` (none when it does not exist); the last line of an
    interrupted write, cut short, is left out."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            out.append(Judgement(**{k: obj[k] for k in Judgement.__dataclass_fields__}))
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines) and not line.endswith("}"):
                break  # cut short by a crash mid-line
            raise JudgementsError(f"{path}:{number}: not a judgement ({exc})") from None
    return out


def verdicts_of(judgements: Iterable[Judgement], prompt: str | None = None
                ) -> dict[tuple[str, str, str], bool | None]:
    """(request_id, arm, output digest) -> the latest verdict, of the template `prompt` only
    when given."""
    return {(j.request_id, j.arm, j.output): j.verdict for j in judgements
            if prompt is None or j.prompt == prompt}


def append(path: Path, judgement: Judgement) -> None:
    """One judgement added to `path`, flushed to disk before returning."""
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(asdict(judgement), ensure_ascii=False) + "\n")
        f.flush()

