"""`layergate watch --serve PORT`: the watch over HTTP, for Prometheus, Flagger and Argo
Rollouts.

- `GET /metrics` (Prometheus): the `layergate_watch_*` metrics;
- `GET /status[?stage=S]` (an Argo Rollouts `web` metric, `jsonPath: "{$.stage_verdict}"`):
  the board's JSON (harness/watch/board.py);
- `/flagger/rollout` (Flagger `rollout` webhook): 200 while the watch has data and nothing
  is decided bad, 403 otherwise (a failed check);
- `/flagger/confirm-traffic-increase`: 200 once for each stage the watch advanced past (the
  step onto the first stage is free), 403 = wait;
- `/flagger/confirm-promotion`: 200 once every stage passed, 403 = wait;
- `/flagger/rollback`: 200 when the watch decided to roll back (Flagger then rolls back),
  403 otherwise.

Flagger webhooks are POSTed (any body); GET answers the same. 403 is what Flagger's own
load tester answers for a closed gate; Flagger treats any status above 202 as "no".
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from harness.watch.board import Board

GO, HALT = 200, 403


def flagger_answer(board: Board, hook: str) -> tuple[int, str]:
    """(HTTP status, why) for Flagger webhook type `hook`."""
    s = board.snapshot().status
    if hook == "rollout":
        ok = s.verdict in ("pending", "pass") and s.state != "no_data"
        return (GO, f"watching stage {s.stage:g} %") if ok else (HALT, _why(board))
    if hook == "confirm-traffic-increase":
        if board.grant_traffic_increase():
            return GO, f"stage {s.stage:g} %"
        return HALT, f"stage {s.stage:g} % not decided yet ({s.state})" \
            if s.verdict == "pending" else _why(board)
    if hook == "confirm-promotion":
        return (GO, "every stage passed") if s.verdict == "pass" else (HALT, _why(board))
    if hook == "rollback":
        return (GO, _why(board)) if s.verdict == "fail" else (HALT, f"no rollback ({s.state})")
    raise KeyError(hook)


def _why(board: Board) -> str:
    s = board.snapshot().status
    if s.state == "no_data":
        detail = s.no_data_reason or "no data"
    else:
        detail = "; ".join(s.reasons) or "undecided"
    return f"{s.state} at stage {s.stage:g} %: {detail}"


def serve(board: Board, registry: CollectorRegistry, host: str, port: int
          ) -> ThreadingHTTPServer:
    """Start answering on host:port in a daemon thread; `shutdown()` stops it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            self._route()

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)  # Flagger's payload: the canary's name and phase
            self._route()

        def _route(self) -> None:
            url = urlparse(self.path)
            if url.path == "/metrics":
                return self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            if url.path == "/status":
                stage = parse_qs(url.query).get("stage", [None])[0]
                try:
                    value = None if stage is None else float(stage)
                except ValueError:
                    return self._json(400, {"error": f"stage must be a number, got {stage!r}"})
                return self._json(200, board.to_json(value))
            if url.path == "/health":
                return self._json(200, {"status": "ok"})
            if url.path.startswith("/flagger/"):
                try:
                    code, why = flagger_answer(board, url.path.removeprefix("/flagger/"))
                except KeyError:
                    return self._json(404, {"error": f"no Flagger hook {url.path}; use "
                                            "rollout, confirm-traffic-increase, "
                                            "confirm-promotion or rollback"})
                return self._json(code, {"verdict": board.snapshot().status.verdict,
                                         "message": why})
            return self._json(404, {"error": f"no route {url.path}; see /status, /metrics, "
                                    "/flagger/<hook>"})

        def _json(self, code: int, body: dict) -> None:
            self._send(code, (json.dumps(body) + "\n").encode(), "application/json")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # Prometheus and the controllers poll often; keep stderr for decisions

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="watch-http", daemon=True).start()
    return server
