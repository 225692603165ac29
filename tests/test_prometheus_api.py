"""The one Prometheus API client (harness/prometheus_api.py), against a real local HTTP
server answering as Prometheus does (the real Prometheus: test_watch_prometheus.py,
test_dashboards_promql.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import pytest

from layergate.exporters.errors import InfrastructureError
from layergate.harness.processes import free_port
from layergate.harness.prometheus_api import PrometheusAPI, PrometheusError
from tests.support.http_server import serving


class _Prometheus(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        url = urlparse(self.path)
        query = parse_qs(url.query).get("query", [""])[0]
        if query == "up":
            body = {"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"job": "x"}, "value": [1.0, "1"]}]}}
        elif query == "no json":
            return self._send(502, b"<html>bad gateway</html>")
        elif query == "down":
            body = {"status": "error", "errorType": "timeout", "error": "query timed out"}
        else:
            body = {"status": "error", "errorType": "bad_data",
                    "error": f"parse error in {query!r}"}
        self._send(200 if body["status"] == "success" else 400, json.dumps(body).encode())

    def _send(self, code: int, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    with serving(_Prometheus) as url:
        yield url.rstrip("/")


def test_an_instant_query_returns_its_series(prometheus: str) -> None:
    with PrometheusAPI(prometheus) as api:
        assert api.query("up", at=12.5) == [{"metric": {"job": "x"}, "value": [1.0, "1"]}]


def test_a_refused_query_names_the_server_and_the_query(prometheus: str) -> None:
    with PrometheusAPI(prometheus) as api, pytest.raises(PrometheusError) as got:
        api.query("rate(x[")
    assert got.value.refused and isinstance(got.value, InfrastructureError)
    assert prometheus in str(got.value) and "(query 'rate(x[')" in str(got.value)
    assert got.value.error == "parse error in 'rate(x['"


@pytest.mark.parametrize(("query", "problem"), [
    ("no json", "answered HTTP 502 without JSON"),
    ("down", "failed a query: timeout: query timed out"),
])
def test_a_failed_answer_says_what_failed(prometheus: str, query: str, problem: str) -> None:
    with PrometheusAPI(prometheus) as api, pytest.raises(PrometheusError) as got:
        api.query(query)
    assert not got.value.refused
    assert got.value.where == f"Prometheus at {prometheus} {problem}"
    assert str(got.value).endswith(f"(query {query!r})")


def test_no_server_is_an_error_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with PrometheusAPI(url, timeout=2) as api, pytest.raises(PrometheusError) as got:
        api.query_range("up", 0, 10)
    assert got.value.where.startswith(f"Prometheus at {url} did not answer")
    assert "(query 'up')" in str(got.value)
