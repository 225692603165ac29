"""The one Prometheus `/metrics` server: a registry served on host:port from a daemon thread.

`GET /metrics` is prometheus_client's own WSGI app (so the text or OpenMetrics format is
negotiated and gzip honoured as its `start_http_server` does); a server with `routes` hands
every other request to them (watch's `/status` and Flagger hooks), one without answers the
registry on every path, as prometheus_client's server always has. The replay, the capacity
sweep, `metrics --serve` and `watch --serve` all start theirs here.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a scrape in flight never holds the process up


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass  # Prometheus and the controllers poll often; keep stderr for decisions


class MetricsServer:
    """A started server; `port` is the one bound (port 0 picks a free one)."""

    def __init__(self, httpd: WSGIServer, name: str) -> None:
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name=name, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def stop(self) -> None:
        """Stop answering and close the socket (the port is free again on return)."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def serve_metrics(registry: CollectorRegistry, host: str, port: int,
                  routes: WsgiApp | None = None, name: str = "metrics-http") -> MetricsServer:
    """Serve `registry` at http://HOST:PORT/metrics; an OSError when it cannot listen."""
    metrics = make_wsgi_app(registry)
    app = metrics if routes is None else _dispatch(metrics, routes)
    # the address family of the host, so "::" listens on IPv6 (as prometheus_client does)
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                  flags=socket.AI_PASSIVE)[0]
    server_class = type("_Server", (_Server,), {"address_family": family})
    return MetricsServer(make_server(address[0], port, app, server_class, _QuietHandler), name)


def _dispatch(metrics: WsgiApp, routes: WsgiApp) -> WsgiApp:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ["PATH_INFO"] == "/metrics" and environ["REQUEST_METHOD"] == "GET":
            return metrics(environ, start_response)
        return routes(environ, start_response)

    return app
