"""OpenAI batch input files: JSON lines `{"custom_id", "method": "POST", "url", "body"}`. The
bodies are sent as they are; `custom_id` becomes the request's id."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from layergate.exporters.traffic import ENDPOINTS, TrafficError, parse_record
from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import RequestRow
from layergate.harness.traces.source import TraceError, json_lines

FIELDS = ("custom_id", "method", "url", "body")


def _looks_like(head: str) -> bool:
    return '"custom_id"' in head and '"body"' in head


@trace_format("openai-batch", length_only=False, timed=False, looks_like=_looks_like,
              summary="JSONL: custom_id, method, url, body")
def read(path: Path, context: ReadContext) -> Iterator[RequestRow | TraceError]:
    seen: dict[str, int] = {}
    for line, obj in json_lines(path):
        if isinstance(obj, TraceError):
            yield obj
            continue
        try:
            row = parse(obj, path, line)
            if row.id in seen:
                raise TraceError(path, line, "custom_id", f"duplicate {row.id!r} (first on "
                                                          f"line {seen[row.id]})")
        except TraceError as exc:
            yield exc
            continue
        seen[row.id] = line
        yield row


def parse(obj: dict, path: Path, line: int) -> RequestRow:
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise TraceError(path, line, unknown[0], f"unknown field (allowed: {', '.join(FIELDS)})")
    rid = obj.get("custom_id")
    if not isinstance(rid, str) or not rid:
        raise TraceError(path, line, "custom_id", f"must be a non-empty string: {rid!r}")
    if obj.get("method") != "POST":
        raise TraceError(path, line, "method", f"must be POST: {obj.get('method')!r}")
    if obj.get("url") not in ENDPOINTS:
        raise TraceError(path, line, "url", f"layergate replays {', '.join(ENDPOINTS)}: "
                                            f"{obj.get('url')!r}")
    try:  # the traffic format's own checks of a body, reported on this file's line
        record = parse_record({"id": rid, "offset_s": 0, "scenario": "openai-batch",
                               "endpoint": obj["url"], "body": obj.get("body")}, path, line)
    except TrafficError as exc:
        raise TraceError(path, line, exc.field, exc.message) from None
    return RequestRow(line, rid, record.endpoint, dict(record.body))
