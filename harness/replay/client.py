"""Send one traffic record to one arm, streaming, and turn the answer into an `ArmResult`.

Times are measured from `intended` (a `time.perf_counter()` value: when the request was
*meant* to go out), so a late send counts against the arm (no coordinated omission).
Every failure — timeout, refused connection, 4xx / 5xx, a broken stream — becomes an
`ArmResult` with `ok=False` and the error in words; nothing here raises.
Plain httpx: it runs under Locust's gevent (the sockets are patched) and in threads.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import httpx

from exporters.records import ArmResult
from exporters.traffic import TrafficRecord
from harness.replay.sse import StreamAccumulator, StreamError, sse_payloads


def streaming_body(record: TrafficRecord, model: str | None) -> dict[str, Any]:
    body = copy.deepcopy(dict(record.body))
    body["stream"] = True
    body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
    if model:
        body["model"] = model
    return body


def result_base(record: TrafficRecord, arm: str, repeat: int = 0,
                concurrency: int = 1) -> dict[str, Any]:
    return dict(request_id=record.id, arm=arm, scenario=record.scenario,
                max_tokens=record.max_tokens, repeat=repeat, concurrency=concurrency)


def error_message(raw: bytes, status: int) -> str:
    text = raw.decode("utf-8", errors="replace")
    try:
        message = json.loads(text).get("error", {}).get("message")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {status}: {message or text[:300]}"


def send_request(client: httpx.Client, base_url: str, record: TrafficRecord, arm: str, *,
                 intended: float, timeout: float, model: str | None = None,
                 repeat: int = 0, concurrency: int = 1) -> ArmResult:
    """POST `record` to `base_url + record.endpoint` and read the SSE stream to the end."""
    base = result_base(record, arm, repeat, concurrency)
    acc = StreamAccumulator()
    status = None
    deadline = intended + timeout
    try:
        with client.stream("POST", base_url.rstrip("/") + record.endpoint,
                           json=streaming_body(record, model), timeout=timeout) as response:
            status = response.status_code
            if status >= 400:
                return failure(base, status, error_message(response.read(), status), acc,
                               intended)
            for line in response.iter_lines():
                payload = sse_payloads(line)
                if payload is not None:
                    acc.feed_payload(payload, time.perf_counter() - intended)
                if time.perf_counter() > deadline:
                    raise httpx.ReadTimeout(f"no complete answer within {timeout}s")
                if acc.done:
                    break
    except httpx.TimeoutException as exc:
        return failure(base, status, f"timeout after {timeout}s: {exc}", acc, intended)
    except httpx.ConnectError as exc:
        return failure(base, status, f"connection failed: {exc}", acc, intended)
    except (httpx.HTTPError, StreamError) as exc:
        return failure(base, status, f"{type(exc).__name__}: {exc}", acc, intended)
    return finish(base, status, acc, intended)


def finish(base: dict[str, Any], status: int | None, acc: StreamAccumulator,
           intended: float) -> ArmResult:
    """The result of a stream read to its end (a failure when it never said why it ended)."""
    e2e = time.perf_counter() - intended
    if acc.finish_reason is None:
        return failure(base, status, "stream ended without a finish_reason", acc, intended)
    times = acc.token_times
    return ArmResult(
        ok=True, http_status=status, ttft_s=times[0] if times else e2e, e2e_s=e2e,
        itl_s=tuple(b - a for a, b in zip(times, times[1:], strict=False)),
        output_text=acc.output_text, output_tokens=acc.output_tokens,
        prompt_tokens=acc.prompt_tokens, finish_reason=acc.finish_reason,
        token_ids=acc.token_ids, logprobs=tuple(acc.logprobs) if acc.logprobs else None,
        top_logprobs=tuple(acc.top_logprobs) if acc.top_logprobs else None,
        extension=acc.extension, **base)


def failure(base: dict[str, Any], status: int | None, error: str, acc: StreamAccumulator,
            intended: float) -> ArmResult:
    return ArmResult(ok=False, error=error, http_status=status,
                     e2e_s=time.perf_counter() - intended, output_text=acc.output_text,
                     **base)
