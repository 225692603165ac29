"""OpenAI batch input files: JSON lines `{"custom_id", "method": "POST", "url", "body"}`. The
bodies are sent as they are (`tools`, `tool_choice`, `response_format`, a history of tool
calls and results included); `custom_id` becomes the request's id.

With the batch's output file (`--responses`: JSON lines `{"id", "custom_id", "response":
{"status_code", "request_id", "body"}, "error"}`), each request's recorded response is the
`response.body` of the output line with its custom_id, as the batch returned it (its
`choices[0].message.tool_calls` included). A request the batch failed (`error` set, or a
status other than 200) or that has no output line gets no recorded response; the report
lists both, and the output lines that match no request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from layergate.exporters.traffic import ENDPOINTS, TrafficError, parse_record
from layergate.harness.traces.formats import ReadContext, trace_format
from layergate.harness.traces.rows import RequestRow
from layergate.harness.traces.source import TraceError, json_lines

FIELDS = ("custom_id", "method", "url", "body")
OUTPUT_FIELDS = ("id", "custom_id", "response", "error")
FAILED = object()  # an output line of a request the batch failed


def _looks_like(head: str) -> bool:
    return '"custom_id"' in head and '"body"' in head


@trace_format("openai-batch", length_only=False, timed=False, looks_like=_looks_like,
              summary="JSONL: custom_id, method, url, body")
def read(path: Path, context: ReadContext) -> Iterator[RequestRow | TraceError]:
    answers: dict[str, Any] = {}
    if context.responses is not None:
        for item in responses(context.responses):
            if isinstance(item, TraceError):
                yield item
            else:
                answers[item[0]] = item[1]
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
        if context.responses is not None:
            answer = answers.pop(row.id, None)
            if answer is None:
                row = RequestRow(row.line, row.id, row.endpoint, row.body,
                                 notes=("no_response",))
            elif answer is FAILED:
                row = RequestRow(row.line, row.id, row.endpoint, row.body,
                                 notes=("response_failed",))
            else:
                row = RequestRow(row.line, row.id, row.endpoint, row.body, answer)
        yield row
    for rid in answers:  # read to the end: what is left answers no request of the file
        context.note("responses_unmatched", rid)


def parse(obj: dict, path: Path, line: int) -> RequestRow:
    if "response" in obj and "body" not in obj:
        raise TraceError(path, line, "response", "this is a batch's output file: pass the "
                                                 "input file as SOURCE and this one as "
                                                 "--responses")
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


def responses(path: Path) -> Iterator[tuple[str, Any] | TraceError]:
    """(custom_id, the response body, or FAILED) per line of a batch's output file."""
    seen: dict[str, int] = {}
    for line, obj in json_lines(path):
        if isinstance(obj, TraceError):
            yield obj
            continue
        try:
            rid, answer = _output_line(obj, path, line)
            if rid in seen:
                raise TraceError(path, line, "custom_id", f"duplicate {rid!r} (first on line "
                                                          f"{seen[rid]})")
        except TraceError as exc:
            yield exc
            continue
        seen[rid] = line
        yield rid, answer


def _output_line(obj: dict, path: Path, line: int) -> tuple[str, Any]:
    unknown = sorted(set(obj) - set(OUTPUT_FIELDS))
    if unknown:
        raise TraceError(path, line, unknown[0], "unknown field of a batch output line "
                                                 f"(allowed: {', '.join(OUTPUT_FIELDS)})")
    rid = obj.get("custom_id")
    if not isinstance(rid, str) or not rid:
        raise TraceError(path, line, "custom_id", f"must be a non-empty string: {rid!r}")
    response = obj.get("response")
    if obj.get("error") is not None:
        return rid, FAILED
    if not isinstance(response, dict):
        raise TraceError(path, line, "response", "must be an object (or `error` set)")
    if response.get("status_code", 200) != 200:
        return rid, FAILED
    body = response.get("body")
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list) \
            or not body["choices"]:
        raise TraceError(path, line, "response.body", "must be a response object with a "
                                                      "non-empty `choices` list")
    return rid, body
