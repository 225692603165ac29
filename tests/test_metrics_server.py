"""The one /metrics server (exporters/metrics_server.py), over real sockets."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from layergate.exporters.metrics_server import serve_metrics

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("layergate_test_things", "Things counted", registry=registry).inc(3)
    return registry


def test_it_serves_the_registry_on_a_free_port_and_stops() -> None:
    server = serve_metrics(_registry(), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert server.port > 0
        got = httpx.get(f"{base}/metrics")
        assert got.status_code == 200 and "layergate_test_things_total 3.0" in got.text
        # negotiated as prometheus_client's own server does, for a Prometheus scrape
        got = httpx.get(f"{base}/metrics", headers={"Accept": OPENMETRICS})
        assert got.headers["content-type"].startswith("application/openmetrics-text")
        assert got.text.endswith("# EOF\n")
        assert "layergate_test_things_total" in httpx.get(f"{base}/").text  # no routes
    finally:
        server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base}/metrics")


def test_other_requests_go_to_the_routes() -> None:
    def routes(environ, start_response):
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']}".encode()]

    server = serve_metrics(_registry(), "127.0.0.1", 0, routes=routes)
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert "layergate_test_things_total" in httpx.get(f"{base}/metrics").text
        got = httpx.get(f"{base}/status")
        assert (got.status_code, got.text) == (404, "GET /status")
        assert httpx.post(f"{base}/metrics").text == "POST /metrics"
    finally:
        server.stop()


def test_a_port_in_use_is_an_oserror() -> None:
    server = serve_metrics(_registry(), "127.0.0.1", 0)
    try:
        with pytest.raises(OSError):
            serve_metrics(_registry(), "127.0.0.1", server.port)
    finally:
        server.stop()
