"""`layergate dashboards push` against a fake Grafana (no Grafana server is installable
here): a small HTTP server speaking the few Grafana API calls the push makes, with real
auth checks, so the client library, the payloads and the exit codes are exercised."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.harness.cli import main
from layergate.harness.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "glsa_test_token"
BASIC = "Basic " + base64.b64encode(b"admin:s3cret").decode()


class FakeGrafana(ThreadingHTTPServer):
    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.datasources: dict[str, dict] = {}
        self.folders: dict[str, dict] = {}
        self.dashboards: dict[str, dict] = {}


class _Handler(BaseHTTPRequestHandler):
    server: FakeGrafana

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        if self.headers.get("Authorization") in (f"Bearer {TOKEN}", BASIC):
            return True
        self._send(401, {"message": "invalid API key"})
        return False

    def _body(self) -> dict:
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if not self._authorised():
            return
        s = self.server
        if self.path == "/api/frontend/settings":
            return self._send(200, {"buildInfo": {"version": "11.2.0"}})
        if self.path.startswith("/api/datasources/uid/"):
            uid = self.path.rsplit("/", 1)[1]
            if uid in s.datasources:
                return self._send(200, s.datasources[uid])
            return self._send(404, {"message": "Data source not found"})
        if self.path.startswith("/api/folders/"):
            uid = self.path.rsplit("/", 1)[1]
            if uid in s.folders:
                return self._send(200, s.folders[uid])
            return self._send(404, {"message": "folder not found"})
        self._send(404, {"message": "not found"})

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorised():
            return
        body, s = self._body(), self.server
        if self.path == "/api/datasources":
            s.datasources[body["uid"]] = body
            return self._send(200, {"message": "Datasource added", "id": 1})
        if self.path == "/api/folders":
            s.folders[body["uid"]] = body
            return self._send(200, body)
        if self.path == "/api/dashboards/db":
            board = body["dashboard"]
            if body.get("folderUid") not in s.folders:
                return self._send(400, {"message": "folder not found"})
            s.dashboards[board["uid"]] = body
            return self._send(200, {"status": "success", "uid": board["uid"],
                                    "url": f"/d/{board['uid']}/x"})
        self._send(404, {"message": "not found"})

    def do_PUT(self) -> None:  # noqa: N802
        if not self._authorised():
            return
        body = self._body()
        self.server.datasources[body["uid"]] = body
        self._send(200, {"message": "Datasource updated"})


@pytest.fixture()
def grafana() -> Iterator[tuple[FakeGrafana, str]]:
    port = free_port()
    server = FakeGrafana(port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{port}"
    server.shutdown()
    server.server_close()


def test_push_uploads_every_dashboard_and_the_datasource(grafana) -> None:
    server, url = grafana
    runner = CliRunner()
    for _ in range(2):  # the second push updates in place
        res = runner.invoke(main, ["dashboards", "push", "--grafana-url", url,
                                   "--api-key", TOKEN, "--prometheus-url", "http://prom:9090"])
        assert res.exit_code == 0, res.output
    files = sorted((ROOT / "dashboards" / "grafana").glob("*.json"))
    assert set(server.dashboards) == {json.loads(f.read_text())["uid"] for f in files}
    for body in server.dashboards.values():
        assert body["overwrite"] is True and body["folderUid"] == "layergate"
        assert body["dashboard"]["id"] is None
    ds = server.datasources["layergate-prometheus"]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prom:9090"
    assert "4 dashboards pushed" in res.output


def test_push_with_user_and_password(grafana) -> None:
    server, url = grafana
    res = CliRunner().invoke(main, ["dashboards", "push", "--grafana-url", url,
                                    "--user", "admin", "--password", "s3cret"])
    assert res.exit_code == 0, res.output
    assert len(server.dashboards) == 4


def test_bad_credentials_exit_4(grafana) -> None:
    server, url = grafana
    res = CliRunner().invoke(main, ["dashboards", "push", "--grafana-url", url,
                                    "--api-key", "wrong"])
    assert res.exit_code == 4, res.output
    assert "refused the credentials" in res.output and not server.dashboards


def test_unreachable_grafana_exit_4() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    res = CliRunner().invoke(main, ["dashboards", "push", "--grafana-url", url,
                                    "--timeout", "2"])
    assert res.exit_code == 4, res.output
    assert "not reachable" in res.output and url in res.output


@pytest.mark.parametrize("args", [
    ["--grafana-url", "localhost:3000"],
    ["--grafana-url", "http://x", "--api-key", "k", "--user", "u", "--password", "p"],
    ["--grafana-url", "http://x", "--user", "u"],
    [],
])
def test_usage_errors_exit_2(args: list[str]) -> None:
    res = CliRunner().invoke(main, ["dashboards", "push", *args])
    assert res.exit_code == 2, res.output
