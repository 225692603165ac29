"""Send one traffic record to one arm, streaming, and turn the answer into an `ArmResult`:
the one way a request leaves layergate, for the replay (gevent, under Locust) and for the
repeat suite and benchmarks (httpx, in threads) alike.

Timeout: the answer must be complete by `intended + timeout`, where `intended` is the
`time.perf_counter()` value at which the request was *meant* to go out. That one deadline
covers everything — waiting for a connection, connecting, sending, the headers and every
chunk — and counts the time a late send lost (open loop, no coordinated omission): a request
sent after its deadline fails at once without going out. Latencies count from `intended`
too. Every failure (timeout, refused connection, HTTP 4xx / 5xx, a broken or malformed
stream) becomes an `ArmResult` with `ok=False` and the reason in words; nothing raises.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from exporters.records import ArmResult
from exporters.traffic import TrafficRecord
from harness.replay.openai_stream import (
    REQUEST_HEADERS,
    ResultBuilder,
    StreamAccumulator,
    StreamError,
    encode_body,
    error_message,
)
from harness.replay.transport import (
    ConnectFailed,
    StreamBroken,
    Transport,
    TransportTimeout,
)


@dataclass(frozen=True)
class Target:
    """Where an arm's requests go: its base URL, and the `model` to put in the body."""

    arm: str
    url: str
    model: str | None = None

    def url_for(self, endpoint: str) -> str:
        return self.url.rstrip("/") + endpoint


def send(transport: Transport, target: Target, record: TrafficRecord, *, intended: float,
         timeout: float, headers: Mapping[str, str] | None = None, repeat: int = 0,
         concurrency: int = 1) -> ArmResult:
    """POST `record` to `target` and read the SSE stream to its end (see the module's
    docstring for the deadline)."""
    build = ResultBuilder(record, target.arm, intended, repeat, concurrency)
    acc = StreamAccumulator()
    deadline = intended + timeout
    if time.perf_counter() >= deadline:
        return build.failure(f"timeout after {timeout}s: its send time had already passed")
    status = None
    try:
        with transport.post(target.url_for(record.endpoint), encode_body(record, target.model),
                            {**REQUEST_HEADERS, **(headers or {})}, deadline) as response:
            status = response.status
            if status >= 400:
                return build.failure(error_message(response.read(), status), status)
            for line in response.lines():
                now = time.perf_counter()
                acc.feed_line(line, now - intended)
                if acc.done:
                    break
                if now > deadline:  # a server that keeps talking never makes a socket wait
                    raise TransportTimeout("deadline passed while the stream went on")
            e2e = time.perf_counter() - intended
    except TransportTimeout:
        return build.failure(f"timeout after {timeout}s", status, acc)
    except ConnectFailed as exc:
        return build.failure(f"connection failed: {exc}", status, acc)
    except StreamBroken as exc:
        return build.failure(f"connection broken: {exc}", status, acc)
    except StreamError as exc:
        return build.failure(str(exc), status, acc)
    return build.finished(status, acc, e2e)
