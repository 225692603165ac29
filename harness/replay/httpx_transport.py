"""The transport for threads (`transport.py` says what a transport promises): httpx, with
every socket wait ended at the exchange's deadline. The repeat suite, the determinism check
and the benchmarks send with it; tests give it an `httpx.MockTransport`."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

from layergate.harness.replay.transport import (
    ConnectFailed,
    Response,
    StreamBroken,
    TransportError,
    TransportTimeout,
)

# the deadline of the exchange running in this thread, read by every socket operation
_DEADLINE: ContextVar[float | None] = ContextVar("layergate_deadline", default=None)
_MIN_WAIT_S = 1e-4  # past the deadline a socket still hands over what it already holds


def _clamp(timeout: float | None) -> float | None:
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = max(deadline - time.perf_counter(), _MIN_WAIT_S)
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every wait ends at the current exchange's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _clamp(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _clamp(timeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      _clamp(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_tcp(host, port, _clamp(timeout),
                                                         local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._backend.connect_unix_socket(path, _clamp(timeout),
                                                                 socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def deadline_client(max_connections: int) -> httpx.Client:
    """An httpx client whose socket waits end at the deadline `HttpxTransport.post` sets.
    httpx's timeouts count per read, so a stream that trickles would outlive them; httpx
    has no public hook for httpcore's network backend, hence the one private attribute
    (`_pool`), covered by tests/test_client.py's deadline test."""
    limits = httpx.Limits(max_connections=max_connections,
                          max_keepalive_connections=max_connections)
    transport = httpx.HTTPTransport(limits=limits)
    transport._pool = httpcore.ConnectionPool(  # noqa: SLF001
        ssl_context=httpx.create_ssl_context(), max_connections=max_connections,
        max_keepalive_connections=max_connections, network_backend=_DeadlineBackend())
    return httpx.Client(transport=transport, timeout=None)


@contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except httpx.TimeoutException as exc:
        raise TransportTimeout(f"{type(exc).__name__}: {exc}") from exc
    except httpx.ConnectError as exc:
        raise ConnectFailed(str(exc) or type(exc).__name__) from exc
    except httpx.HTTPError as exc:
        raise StreamBroken(f"{type(exc).__name__}: {exc}") from exc


class _HttpxLines:
    """The body's lines, errors mapped; an object rather than a generator, so the
    consumer's `break` leaves it open for `drain`."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines

    def __iter__(self) -> _HttpxLines:
        return self

    def __next__(self) -> str:
        with _httpx_errors():
            return next(self._lines)


class _HttpxResponse:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self._lines: _HttpxLines | None = None

    def read(self) -> bytes:
        with _httpx_errors():
            return self._response.read()

    def lines(self) -> Iterator[str]:
        if self._lines is None:
            self._lines = _HttpxLines(self._response.iter_lines())
        return self._lines

    def drain(self) -> None:
        """Read what is left (the end of the chunked body after [DONE]), so the connection
        goes back to the pool instead of being closed."""
        if self._lines is None:
            self.read()
        else:
            for _ in self._lines:
                pass


class HttpxTransport:
    """The transport for threads. `client` defaults to `deadline_client`; tests pass an
    `httpx.Client(transport=httpx.MockTransport(...))` (whose deadline is then checked
    between lines only)."""

    def __init__(self, client: httpx.Client | None = None, max_connections: int = 64) -> None:
        self.client = client or deadline_client(max_connections)

    @contextmanager
    def post(self, url: str, body: bytes, headers: Mapping[str, str],
             deadline: float) -> Iterator[Response]:
        token = _DEADLINE.set(deadline)
        try:
            left = max(deadline - time.perf_counter(), _MIN_WAIT_S)
            with _httpx_errors():
                request = self.client.build_request("POST", url, content=body,
                                                    headers=dict(headers),
                                                    timeout=httpx.Timeout(left))
                response = self.client.send(request, stream=True)
            try:
                wrapped = _HttpxResponse(response)
                yield wrapped
                with suppress(TransportError):  # the answer is complete; only reuse is lost
                    wrapped.drain()
            finally:
                response.close()
        finally:
            _DEADLINE.reset(token)

    def close(self) -> None:
        self.client.close()
