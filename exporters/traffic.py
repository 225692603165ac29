"""The traffic format: one JSON request per line (docs/FORMATS.md, "Traffic file"). It lives
in `exporters`, the bottom layer, because both the harness and the engine's calibration read
it (docs/ARCHITECTURE.md).

Reading validates every field of every line. A bad line raises `TrafficError` naming the
file, the line number and the field; with `skip_invalid=True` reading goes on and every
skipped line is reported in `TrafficFile.skipped` — nothing is dropped silently.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layergate.exporters.atomic import atomic_file
from layergate.exporters.errors import UsageError
from layergate.exporters.references import BadReference, parse_reference

if TYPE_CHECKING:
    import numpy as np

ENDPOINTS = ("/v1/chat/completions", "/v1/completions")
CHAT, COMPLETIONS = ENDPOINTS
FIELDS = ("id", "offset_s", "scenario", "endpoint", "body", "response", "reference")


class TrafficError(UsageError, ValueError):
    """A traffic line that does not follow the format; says where and which field."""

    def __init__(self, path: str | Path, line: int, field: str, message: str) -> None:
        self.path, self.line, self.field, self.message = str(path), line, field, message
        super().__init__(f"{path}:{line}: field {field!r}: {message}")


@dataclass(frozen=True)
class TrafficRecord:
    id: str
    offset_s: float
    scenario: str
    endpoint: str
    body: Mapping[str, Any]
    response: Mapping[str, Any] | None = None
    # what a right answer is (exporters/references.py); None: the record has none
    reference: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "offset_s": self.offset_s,
                               "scenario": self.scenario, "endpoint": self.endpoint,
                               "body": dict(self.body)}
        if self.response is not None:
            out["response"] = dict(self.response)
        if self.reference is not None:
            out["reference"] = dict(self.reference)
        return out

    @property
    def max_tokens(self) -> int | None:
        value = self.body.get("max_tokens", self.body.get("max_completion_tokens"))
        return value if isinstance(value, int) else None


@dataclass(frozen=True)
class SkippedLine:
    line: int
    reason: str


@dataclass(frozen=True)
class TrafficFile:
    path: Path
    records: tuple[TrafficRecord, ...]
    skipped: tuple[SkippedLine, ...] = ()
    lines: tuple[int, ...] = ()  # the line number of each record, for error messages

    def __len__(self) -> int:
        return len(self.records)


def _check_body(endpoint: str, body: Any, where: tuple[Path, int]) -> None:
    if not isinstance(body, dict):
        raise TrafficError(*where, "body", f"must be an object, got {type(body).__name__}")
    if endpoint == CHAT:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise TrafficError(*where, "body.messages", "a chat request needs a non-empty list")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise TrafficError(*where, f"body.messages[{i}]",
                                   "each message needs a string 'role'")
            # an assistant message that only calls tools may leave out its content
            if "content" not in message and not (
                    message["role"] == "assistant"
                    and any(message.get(k) for k in ("tool_calls", "function_call"))):
                raise TrafficError(*where, f"body.messages[{i}].content", "missing")
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str | list) or not prompt:
            raise TrafficError(*where, "body.prompt",
                               "a completions request needs a non-empty string or list")
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool)
                                   or max_tokens < 1):
        raise TrafficError(*where, "body.max_tokens", f"must be a positive integer: {max_tokens!r}")


def parse_record(obj: Any, path: Path, line: int) -> TrafficRecord:
    """Validate one decoded line; raises TrafficError naming the first bad field."""
    where = (path, line)
    if not isinstance(obj, dict):
        raise TrafficError(*where, "(line)", f"must be a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise TrafficError(*where, unknown[0], f"unknown field (allowed: {', '.join(FIELDS)})")
    rid = obj.get("id")
    if not isinstance(rid, str) or not rid:
        raise TrafficError(*where, "id", f"must be a non-empty string: {rid!r}")
    offset = obj.get("offset_s")
    if (not isinstance(offset, int | float) or isinstance(offset, bool)
            or not math.isfinite(offset) or offset < 0):
        raise TrafficError(*where, "offset_s", f"must be a number >= 0: {offset!r}")
    scenario = obj.get("scenario")
    if not isinstance(scenario, str) or not scenario:
        raise TrafficError(*where, "scenario", f"must be a non-empty string: {scenario!r}")
    endpoint = obj.get("endpoint")
    if endpoint not in ENDPOINTS:
        raise TrafficError(*where, "endpoint", f"must be one of {', '.join(ENDPOINTS)}: "
                                               f"{endpoint!r}")
    _check_body(endpoint, obj.get("body"), where)
    response = obj.get("response")
    if response is not None and not isinstance(response, dict):
        raise TrafficError(*where, "response", "must be an object when present")
    reference = obj.get("reference")
    if reference is not None:
        try:
            parse_reference(reference)
        except BadReference as exc:
            raise TrafficError(*where, f"reference.{exc.field}", exc.message) from None
    return TrafficRecord(rid, float(offset), scenario, endpoint, obj["body"], response,
                         reference)


def read_traffic(path: str | Path, skip_invalid: bool = False) -> TrafficFile:
    """Read and validate a JSONL traffic file (blank lines are allowed and ignored)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise TrafficError(path, 0, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TrafficError(path, 0, "(file)", f"not UTF-8: {exc}") from exc
    records: list[TrafficRecord] = []
    skipped: list[SkippedLine] = []
    first_line: dict[str, int] = {}  # id -> line, in record order
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TrafficError(path, number, "(line)", f"invalid JSON: {exc.msg} "
                                                           f"at column {exc.colno}") from exc
            record = parse_record(obj, path, number)
            if record.id in first_line:
                raise TrafficError(path, number, "id", f"duplicate id {record.id!r} "
                                                       f"(first on line {first_line[record.id]})")
        except TrafficError as exc:
            if not skip_invalid:
                raise
            skipped.append(SkippedLine(number, str(exc)))
            continue
        first_line[record.id] = number
        records.append(record)
    if not records and not skipped:
        raise TrafficError(path, 0, "(file)", "no requests in the file")
    return TrafficFile(path, tuple(records), tuple(skipped), tuple(first_line.values()))


@dataclass(frozen=True)
class Schedule:
    """What figures need of a run's traffic: each request's intended send offset, and the
    responses recorded in production (id, scenario, response)."""

    offsets: Offsets
    recorded: list[tuple[str, str, dict[str, Any]]]


class Offsets(Mapping[str, float]):
    """Request id -> intended send offset (s), as two arrays sorted by id: a million
    requests take tens of MB, where a dict of them takes hundreds."""

    def __init__(self, ids: Sequence[str], offsets: Sequence[float]) -> None:
        import numpy as np  # the figures' reader only: a Locust worker reads records

        # the last line of an id wins, as in a dict filled line by line: sorted stably,
        # each id's first in the lines reversed (numpy.unique's, in half its memory)
        reversed_ids = np.array(ids[::-1], dtype=str)
        order = np.argsort(reversed_ids, kind="stable")
        self._ids = reversed_ids[order]
        del reversed_ids
        first = np.ones(len(order), dtype=bool)
        first[1:] = self._ids[1:] != self._ids[:-1]
        if not first.all():
            self._ids = self._ids[first]
        self._offsets = np.asarray(offsets[::-1], dtype=float)[order[first]] if len(order) \
            else np.zeros(0)

    def at(self, request_ids: Sequence[str]) -> np.ndarray:
        """Each request's offset, NaN for one the traffic lacks."""
        import numpy as np

        wanted = np.asarray(request_ids, dtype=str)
        out = np.full(len(wanted), np.nan)
        if len(self._ids) and len(wanted):
            pos = np.minimum(np.searchsorted(self._ids, wanted), len(self._ids) - 1)
            hit = self._ids[pos] == wanted
            out[hit] = self._offsets[pos[hit]]
        return out

    def __getitem__(self, request_id: str) -> float:
        value = self.at([request_id])[0]
        if value != value:  # NaN: not in the traffic
            raise KeyError(request_id)
        return float(value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids.tolist())

    def __len__(self) -> int:
        return len(self._ids)


# the start of a line as `dumps_record` writes it (compact, id and offset first)
_HEAD = re.compile(r'\{"id":"((?:[^"\\]|\\.)+)","offset_s":(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?),')
# each line's, a block at a time: the rest of the line is taken too, so the search goes on
# from the next line's start, not from every character of this one
_HEADS = re.compile("^" + _HEAD.pattern + "[^\n]*\n", re.MULTILINE)
_BLOCK = 1 << 23  # characters of whole lines read at once


def read_schedule(path: str | Path) -> Schedule:
    """The offsets and recorded responses of a traffic file, without building a record per
    line (a million lines read in seconds): a line as `write_traffic` writes it, without a
    response, is read by its first two fields alone (a block of such lines by one regular
    expression over the block); any other line is parsed, and the fields read are validated
    as `read_traffic` validates them (the rest is not looked at)."""
    import numpy as np  # the figures' reader: a Locust worker, which reads records, never

    path = Path(path)
    id_blocks, offset_blocks = [], []  # each block's as arrays: no million Python objects
    recorded: list[tuple[str, str, dict[str, Any]]] = []
    number = 0  # lines before the block
    try:
        with path.open(encoding="utf-8") as fh:
            for block in _line_blocks(fh):
                lines = block.count("\n")
                heads = _HEADS.findall(block) if '"response":' not in block else []
                ids: list[str] = []
                offsets: list[float] = []
                if len(heads) == lines:  # every line as write_traffic wrote it
                    named, at = zip(*heads, strict=True) if heads else ((), ())
                    ids += named if "\\" not in block else [
                        i if "\\" not in i else json.loads(f'"{i}"') for i in named]
                    offsets += map(float, at)
                else:
                    for at, text in enumerate(block[:-1].split("\n"), number + 1):
                        _schedule_line(path, at, text, ids, offsets, recorded)
                id_blocks.append(np.array(ids, dtype=str))
                offset_blocks.append(np.array(offsets, dtype=float))
                number += lines
    except OSError as exc:
        raise TrafficError(path, 0, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TrafficError(path, 0, "(file)", f"not UTF-8: {exc}") from exc
    return Schedule(Offsets(np.concatenate(id_blocks) if id_blocks else [],
                            np.concatenate(offset_blocks) if offset_blocks else []), recorded)


def _line_blocks(fh: Iterator[str]) -> Iterator[str]:
    """The file's text in blocks of whole lines, each line ending in a newline."""
    rest = ""
    while chunk := fh.read(_BLOCK):  # type: ignore[attr-defined]
        block, newline, rest = (rest + chunk).rpartition("\n")
        if newline:
            yield block + newline
    if rest:
        yield rest + "\n"


def _schedule_line(path: Path, number: int, text: str, ids: list[str], offsets: list[float],
                   recorded: list[tuple[str, str, dict[str, Any]]]) -> None:
    """One line's id and offset (and its recorded response), appended."""
    if not text.strip():
        return
    head = _HEAD.match(text)
    if head and '"response":' not in text:  # as write_traffic wrote it
        ids.append(head[1] if "\\" not in head[1] else json.loads(f'"{head[1]}"'))
        offsets.append(float(head[2]))
        return
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TrafficError(path, number, "(line)", f"invalid JSON: {exc.msg} "
                                                   f"at column {exc.colno}") from exc
    if not isinstance(obj, dict):
        raise TrafficError(path, number, "(line)", "must be a JSON object")
    rid, offset = obj.get("id"), obj.get("offset_s")
    if not isinstance(rid, str) or not rid:
        raise TrafficError(path, number, "id", f"must be a non-empty string: {rid!r}")
    if not isinstance(offset, int | float) or isinstance(offset, bool):
        raise TrafficError(path, number, "offset_s", f"must be a number: {offset!r}")
    ids.append(rid)
    offsets.append(float(offset))
    if obj.get("response") is not None:
        recorded.append((rid, str(obj.get("scenario")), obj["response"]))


def mentions(path: str | Path, text: str) -> bool:
    """Whether the file at `path` holds `text` (ASCII, no newline) anywhere: a look at a
    million lines in a fraction of a second, where a loop over them takes seconds."""
    needle = text.encode()
    keep = len(needle) - 1  # bytes of the blocks before that a mention may begin in
    window = b""
    with Path(path).open("rb") as fh:
        while block := fh.read(_BLOCK):
            window = window[max(0, len(window) - keep):] + block if keep else block
            if needle in window:
                return True
    return False


def write_traffic(path: str | Path, records: Iterable[TrafficRecord]) -> Path:
    """Write records as JSONL atomically (temp file + rename)."""
    return write_traffic_lines(path, map(dumps_record, records))


def write_traffic_lines(path: str | Path, lines: Iterable[str]) -> Path:
    """Write lines already in the format (`dumps_record`'s) atomically: into a temp file
    that becomes `path` only once every line is in, and is removed if writing fails."""
    with atomic_file(path, buffering=1 << 20) as fh:
        for line in lines:
            fh.write(line)
            fh.write("\n")
    return Path(path)


def dumps_record(record: TrafficRecord) -> str:
    return json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"))


def traffic_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def prompt_text(record: TrafficRecord) -> str:
    """All the prompt text of a record (for length classes and redaction checks)."""
    return body_prompt_text(record.endpoint, record.body)


def body_prompt_text(endpoint: str, body: Mapping[str, Any]) -> str:
    if endpoint == COMPLETIONS:
        prompt = body.get("prompt", "")
        return prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
    parts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    return "\n".join(parts)
