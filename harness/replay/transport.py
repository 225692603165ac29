"""The transport seam of the client: how `client.send` gets bytes to an arm and lines back.

A transport does one thing — `post(url, body, headers, deadline)` yielding a `Response`
(status, whole body, or the body line by line) — and keeps one promise: it never waits past
`deadline` (a `time.perf_counter()` value) in any step, connect, send, headers or body, and
raises `TransportTimeout` instead. Failures are its own three exceptions, whatever library
is underneath, so `send` words them the same for every transport.

Two transports: `httpx_transport.HttpxTransport` (threads, and `httpx.MockTransport` in
tests) and `gevent_transport.GeventTransport` (geventhttpclient, several times cheaper per
request under Locust's gevent; it imports gevent, so only the Locust process loads it).
This module holds only what both share, so neither process imports the other's library.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Protocol

from layergate.exporters.errors import InfrastructureError


class TransportError(InfrastructureError):
    """The exchange failed below the protocol; the message says how."""


class TransportTimeout(TransportError):
    """The deadline passed before the answer was complete."""


class ConnectFailed(TransportError):
    """No connection to the arm (refused, unreachable, name not found)."""


class StreamBroken(TransportError):
    """The connection failed after it was made (reset, closed mid-answer, bad HTTP)."""


class Response(Protocol):
    status: int

    def read(self) -> bytes:
        """The whole (rest of the) body."""

    def lines(self) -> Iterator[str]:
        """The body line by line, without line endings, until it ends; blank lines (an
        SSE event's separator) may be left out."""


class Transport(Protocol):
    def post(self, url: str, body: bytes, headers: Mapping[str, str],
             deadline: float) -> AbstractContextManager[Response]:
        """POST `body` to `url`; the response is valid inside the `with` block."""

    def close(self) -> None: ...

