"""The transport of the Locust process: geventhttpclient (what Locust's FastHttpUser is built
on), one connection pool per origin. Under gevent it is several times cheaper per request
than httpx (benchmarks/replay_overhead.py), and the replayer's own cost is part of what it
measures. Imports gevent: only the Locust process may import this module.

The deadline is one `gevent.Timeout` around the whole exchange, the body's reading included.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from http.client import HTTPException

from gevent import Timeout
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPParseError, HTTPSocketPoolResponse
from geventhttpclient.url import URL

from layergate.harness.replay.transport import (
    ConnectFailed,
    Response,
    StreamBroken,
    TransportError,
    TransportTimeout,
)

_READ_ERRORS = (HTTPParseError, HTTPException, OSError)
_UNREACHABLE = {errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH}


def _request_error(exc: Exception) -> TransportError:
    """A failure before the response headers: no connection, or a broken one."""
    if isinstance(exc, socket.gaierror) or getattr(exc, "errno", None) in _UNREACHABLE:
        return ConnectFailed(f"{type(exc).__name__}: {exc}")
    return StreamBroken(f"{type(exc).__name__}: {exc}")


class _GeventResponse:
    def __init__(self, response: HTTPSocketPoolResponse) -> None:
        self._response = response
        self.status = response.status_code

    def read(self) -> bytes:
        try:
            return self._response.read()
        except _READ_ERRORS as exc:
            raise StreamBroken(f"{type(exc).__name__}: {exc}") from exc

    def lines(self) -> Iterator[str]:
        """The body's lines as they arrive, every complete line of one `recv` split in one
        go: geventhttpclient's own `readline` (which reads the same parsed-body buffer and
        socket, in the same way) costs a Python-level search and copy per line, the
        replayer's largest cost per request (profiled). Blank lines are left out (an SSE
        event's separator; a reader skips them anyway). A last line with no line end is
        dropped, as `readline` drops it. A geventhttpclient without that buffer is read
        with its own `readline`."""
        response = self._response
        if not (hasattr(response, "_body_buffer") and hasattr(response, "_sock")):
            yield from self._readlines()
            return
        while True:
            buffer = response._body_buffer  # noqa: SLF001 (the body parsed so far)
            end = buffer.rfind(b"\n")
            if end >= 0:
                block = bytes(buffer[:end + 1])
                del buffer[:end + 1]
                *lines, _ = block.decode("utf-8").split("\n")
                for line in lines:
                    if line and line != "\r":  # SSE's blank separators carry nothing
                        yield line.rstrip("\r")
                continue
            if response.message_complete:
                return
            sock = response._sock  # noqa: SLF001
            if sock is None:
                raise StreamBroken("HTTPConnectionClosed: connection closed.")
            try:
                response.feed(sock.recv(response.block_size))
            except BaseException as exc:  # a timeout too: the socket is not reused
                response.release()
                if isinstance(exc, _READ_ERRORS):
                    raise StreamBroken(f"{type(exc).__name__}: {exc}") from exc
                raise

    def _readlines(self) -> Iterator[str]:
        readline = self._response.readline
        while True:
            try:
                line = readline(b"\n")
            except _READ_ERRORS as exc:
                raise StreamBroken(f"{type(exc).__name__}: {exc}") from exc
            if not line.endswith(b"\n"):
                return  # the end, or a last line with no line end: dropped, as above
            yield line.decode("utf-8").rstrip("\r\n")


class GeventTransport:
    """`concurrency` connections per origin (users x arms that share it). The sockets have
    no timeout of their own: every exchange runs under its deadline's `Timeout`, and a
    socket timeout would make gevent start and cancel one more timer on every wait for a
    chunk (profiled: about a tenth of the worker's cost per request)."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._clients: dict[str, HTTPClient] = {}
        self._targets: dict[str, tuple[HTTPClient, str]] = {}

    def _target(self, url: str) -> tuple[HTTPClient, str]:
        found = self._targets.get(url)
        if found is None:
            parsed = URL(url)
            origin = f"{parsed.scheme}://{parsed.host}:{parsed.port}"
            client = self._clients.get(origin)
            if client is None:
                client = self._clients[origin] = HTTPClient.from_url(
                    parsed, concurrency=self.concurrency, connection_timeout=10.0,
                    network_timeout=None)
            found = self._targets[url] = (client, parsed.request_uri)
        return found

    @contextmanager
    def post(self, url: str, body: bytes, headers: Mapping[str, str],
             deadline: float) -> Iterator[Response]:
        client, path = self._target(url)
        timer = Timeout(max(deadline - time.perf_counter(), 1e-4))
        timer.start()
        try:
            try:
                response = client.request("POST", path, body=body, headers=dict(headers))
            except _READ_ERRORS as exc:
                raise _request_error(exc) from exc
            try:
                yield _GeventResponse(response)
                with suppress(TransportError):  # the answer is complete; only reuse is lost
                    _GeventResponse(response).read()  # the end of the chunked body
            finally:
                response.release()
        except Timeout as exc:
            if exc is not timer:
                raise
            raise TransportTimeout("deadline passed") from None
        finally:
            timer.cancel()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
