"""Turn a forwarded request + the upstream's answer into a traffic record and append it.

Only the request *body* is written (never headers, so never Authorization), as the client
sent it: `tools`, `tool_choice`, `response_format` and a history of tool calls and results
(assistant messages whose content is null or left out) are kept, so a replay asks what the
server was asked. The answer is recorded as the upstream sent it; a stream is rebuilt into
the non-streamed response by `StreamAccumulator.to_response`, tool calls included. `offset_s` is
relative to the first captured request of this session; the scenario is the prompt's
length class (docs/FORMATS.md: short < 10, medium 10-50, long > 50 prompt tokens). The proxy has
no tokenizer: for /v1/completions it takes the upstream's `usage.prompt_tokens`; for chat,
whose usage counts the chat template and system prompt (which scenarios/README.md leaves
out), it estimates the non-system contents' tokens as words + punctuation marks.
A failed write is logged and counted; it never reaches the client.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from layergate.exporters.traffic import (
    COMPLETIONS,
    ENDPOINTS,
    TrafficError,
    TrafficRecord,
    body_prompt_text,
    dumps_record,
    parse_record,
)
from layergate.harness.capture.redact import redact
from layergate.harness.openai_stream import StreamAccumulator, StreamError
from layergate.harness.scenarios import length_class

log = logging.getLogger(__name__)
_PIECES = re.compile(r"\w+|[^\w\s]")


class CaptureStats:
    """The proxy's own counters, on an injected registry (served at /-/capture/metrics)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.forwarded = Counter("layergate_capture_forwarded_total",
                                 "Requests forwarded upstream", ("status",), registry=registry)
        self.records = Counter("layergate_capture_records_total",
                               "Traffic records written", registry=registry)
        self.write_errors = Counter("layergate_capture_write_errors_total",
                                    "Records that could not be written", registry=registry)
        self.skipped = Counter("layergate_capture_skipped_total",
                               "Sampled requests not recordable (bad body or answer)",
                               registry=registry)


def rebuild_response(raw: bytes, streamed: bool, endpoint: str) -> dict[str, Any]:
    """The upstream's answer as a non-streamed response object."""
    text = raw.decode("utf-8")
    if not streamed:
        return json.loads(text)
    acc = StreamAccumulator()
    for line in text.splitlines():
        acc.feed_line(line, 0.0)
    return acc.to_response(endpoint)


def prompt_token_estimate(path: str, request: dict[str, Any], response: dict[str, Any]) -> int:
    usage = (response.get("usage") or {}).get("prompt_tokens")
    if path == COMPLETIONS and isinstance(usage, int):
        return usage
    messages = request.get("messages") or []
    if isinstance(messages, list):
        request = {**request, "messages": [m for m in messages
                                           if not (isinstance(m, dict)
                                                   and m.get("role") == "system")]}
    return len(_PIECES.findall(body_prompt_text(path, request)))


class Recorder:
    def __init__(self, out: Path, stats: CaptureStats, sample: float = 1.0,
                 do_redact: bool = False, seed: int | None = None) -> None:
        self.out, self.stats, self.sample, self.do_redact = out, stats, sample, do_redact
        self.rng = random.Random(seed)
        self.session = time.strftime("%Y%m%d%H%M%S")
        self.count = 0
        self.first: float | None = None

    def wants(self, method: str, path: str) -> bool:
        """Decide before forwarding, so unsampled answers are not even buffered."""
        return method == "POST" and path in ENDPOINTS and self.rng.random() < self.sample

    def record(self, path: str, body: bytes, status: int, raw: bytes, streamed: bool,
               arrived: float) -> None:
        if status != 200:
            return
        try:
            request = json.loads(body)
            response = rebuild_response(raw, streamed, path)
            record = self._make(path, request, response, arrived)
        except (ValueError, StreamError, TrafficError) as exc:
            self.stats.skipped.inc()
            log.warning("capture: not recording a %s request: %s", path, exc)
            return
        self._append(record)

    def _make(self, path: str, request: dict[str, Any], response: dict[str, Any],
              arrived: float) -> TrafficRecord:
        if self.first is None:
            self.first = arrived
        self.count += 1
        prompt_tokens = prompt_token_estimate(path, request, response)
        if self.do_redact:
            request, response = redact(request), redact(response)
        obj = {"id": f"cap-{self.session}-{self.count:06d}",
               "offset_s": round(arrived - self.first, 6), "scenario": length_class(prompt_tokens),
               "endpoint": path, "body": request, "response": response}
        return parse_record(obj, self.out, self.count)

    def _append(self, record: TrafficRecord) -> None:
        try:
            with self.out.open("a", encoding="utf-8") as fh:
                fh.write(dumps_record(record) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            self.stats.write_errors.inc()
            log.error("capture: could not write record %s to %s: %s", record.id, self.out, exc)
            return
        self.stats.records.inc()
