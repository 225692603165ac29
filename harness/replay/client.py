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

A connection that breaks before any answer (no status line) is tried once more, within the
same deadline: a server closes an idle kept-alive connection after its keep-alive timeout
(uvicorn's is 5 s), and a request sent on it at that moment was never read, so sending it
again on another connection is what the server expects.

A server that refuses what layergate adds to a request (stream_options, logprobs: HTTP 400
or 422) gets the request again without them, within the same deadline; the target then
remembers it for its later requests, and each result sent that way says so
(quirk `added_fields_rejected`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from layergate.exporters.catalogue import ADDED_FIELDS_REJECTED, CLOSED_EARLY
from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.openai_stream import (
    REQUEST_HEADERS,
    BodyShape,
    ResultBuilder,
    StreamAccumulator,
    StreamError,
    added_fields,
    error_message,
    streaming_body,
)
from layergate.harness.replay.transport import (
    ConnectFailed,
    StreamBroken,
    Transport,
    TransportTimeout,
)

if TYPE_CHECKING:  # the store is the master's and the parent's, not the sender's
    from layergate.harness.store.results import Head

# what a server answers when a request holds a field it does not accept
REFUSED_FIELD_STATUSES = (400, 422)
# how a result's error begins when no server took the request, or it dropped the stream
CONNECT_FAILED = "connection failed"
CONNECTION_BROKEN = "connection broken"


def is_connection_failure(result: ArmResult | Head) -> bool:
    """No server answered, or it went away mid-answer (not a timeout, not an HTTP error)."""
    return not result.ok and (result.error or "").startswith((CONNECT_FAILED,
                                                                CONNECTION_BROKEN))


@dataclass
class Learned:
    """What a target's answers taught: shared by every request to it from one process."""

    rejects_added_fields: bool = False


@dataclass(frozen=True)
class Target:
    """Where an arm's requests go: its base URL, the `model` to put in the body, the top-K
    logprobs to ask for (0: as the traffic asks), and the tokenizer.json that counts the
    tokens of answers that carry no count."""

    arm: str
    url: str
    model: str | None = None
    top_logprobs: int = 0
    tokenizer: str | None = None
    learned: Learned = field(default_factory=Learned, compare=False, repr=False)

    def url_for(self, endpoint: str) -> str:
        return self.url.rstrip("/") + endpoint

    def shape(self, extras: bool = True) -> BodyShape:
        return BodyShape(self.model, self.top_logprobs, extras)


def send(transport: Transport, target: Target, record: TrafficRecord, *, intended: float,
         timeout: float, headers: Mapping[str, str] | None = None, repeat: int = 0,
         concurrency: int = 1) -> ArmResult:
    """POST `record` to `target` and read the SSE stream to its end (see the module's
    docstring for the deadline and the second attempt), recording how late it went out."""
    lag = time.perf_counter() - intended
    extras = not target.learned.rejects_added_fields
    quirks = () if extras or not added_fields(record, target.shape()) \
        else (ADDED_FIELDS_REJECTED,)
    result = _exchange(transport, target, record, intended, timeout, headers, repeat,
                       concurrency, extras, quirks, lag)
    if _closed_unanswered(result):
        result = _exchange(transport, target, record, intended, timeout, headers, repeat,
                           concurrency, extras, quirks, lag)
    if (extras and result.http_status in REFUSED_FIELD_STATUSES
            and added_fields(record, target.shape())):
        retried = _exchange(transport, target, record, intended, timeout, headers, repeat,
                            concurrency, False, (ADDED_FIELDS_REJECTED,), lag)
        if retried.ok or retried.http_status not in REFUSED_FIELD_STATUSES:
            target.learned.rejects_added_fields = True  # the refusal was of what we added
            return retried
    return result


def _closed_unanswered(result: ArmResult) -> bool:
    """The connection broke before a status line: the server never answered this request."""
    return not result.ok and result.http_status is None \
        and (result.error or "").startswith(CONNECTION_BROKEN)


def _exchange(transport: Transport, target: Target, record: TrafficRecord, intended: float,
              timeout: float, headers: Mapping[str, str] | None, repeat: int,
              concurrency: int, extras: bool, quirks: tuple[str, ...],
              lag: float) -> ArmResult:
    body = streaming_body(record, target.shape(extras))
    build = ResultBuilder(record, target.arm, intended, repeat, concurrency, body,
                          target.tokenizer, quirks, lag)
    acc = StreamAccumulator()
    deadline = intended + timeout
    if time.perf_counter() >= deadline:
        return build.failure(f"timeout after {timeout}s: its send time had already passed")
    status = None
    try:
        with transport.post(target.url_for(record.endpoint), json.dumps(body).encode(),
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
        return build.failure(f"{CONNECT_FAILED}: {exc}", status, acc)
    except StreamBroken as exc:
        return build.failure(f"{CONNECTION_BROKEN}: {exc}", status, acc, CLOSED_EARLY)
    except StreamError as exc:
        return build.failure(str(exc), status, acc, exc.quirk)
    return build.finished(status, acc, e2e)
