"""`layergate watch --serve PORT`: the watch over HTTP, for Prometheus, Flagger and Argo
Rollouts.

- `GET /metrics` (Prometheus): the `layergate_watch_*` metrics;
- `GET /status[?stage=S[&revision=R]]` (an Argo Rollouts `web` metric, `jsonPath:
  "{$.stage_verdict}"`): the board's JSON (harness/watch/board.py); a revision (the
  rollout's pod-template hash) other than the watch's starts the stages over first;
- `POST /flagger/<hook>` (Flagger webhooks: rollout, confirm-traffic-increase,
  confirm-promotion, rollback): answered from the watch's state (harness/watch/flagger.py);
  the payload's name, namespace, phase and checksum are read and logged, and a new checksum
  starts the stages over. POST only: a debugging GET must not look like Flagger asking.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from layergate.harness.watch.board import Board
from layergate.harness.watch.flagger import HOOKS, Payload

FLAGGER = "/flagger/"


def serve(board: Board, registry: CollectorRegistry, host: str, port: int
          ) -> ThreadingHTTPServer:
    """Start answering on host:port in a daemon thread; `shutdown()` stops it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if urlparse(self.path).path.startswith(FLAGGER):
                self._json(405, {"error": "Flagger webhooks are POSTed; a GET would be "
                                 "taken for Flagger asking"}, allow="POST")
                return
            self._route()

        def do_POST(self) -> None:  # noqa: N802
            url = urlparse(self.path)
            if not url.path.startswith(FLAGGER):
                return self._json(405, {"error": f"{url.path} answers GET only"}, allow="GET")
            hook = url.path.removeprefix(FLAGGER)
            if hook not in HOOKS:
                return self._json(404, {"error": f"no Flagger hook {url.path}; use "
                                        f"{', '.join(HOOKS)}"})
            try:
                length = int(self.headers.get("Content-Length") or 0)
                payload = Payload.parse(self.rfile.read(length) if length > 0 else b"")
            except ValueError as exc:
                return self._json(400, {"error": f"{url.path}: {exc}"})
            got = board.flagger(hook, payload)
            return self._json(got.code, {"verdict": board.snapshot().status.verdict,
                                         "message": got.message})

        def _route(self) -> None:
            url = urlparse(self.path)
            if url.path == "/metrics":
                return self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            if url.path == "/status":
                query = parse_qs(url.query)
                stage = query.get("stage", [None])[0]
                revision = query.get("revision", [""])[0].strip()
                try:
                    value = None if stage is None else float(stage)
                except ValueError:
                    return self._json(400, {"error": f"stage must be a number, got {stage!r}"})
                if revision.startswith("{{"):  # Argo left the argument unresolved
                    return self._json(400, {"error": f"revision {revision!r} is an "
                                            "unresolved AnalysisTemplate argument"})
                return self._json(200, board.argo(value, revision))
            if url.path == "/health":
                return self._json(200, {"status": "ok"})
            return self._json(404, {"error": f"no route {url.path}; see /status, /metrics, "
                                    "/flagger/<hook>"})

        def _json(self, code: int, body: dict, allow: str | None = None) -> None:
            self._send(code, (json.dumps(body) + "\n").encode(), "application/json", allow)

        def _send(self, code: int, body: bytes, content_type: str,
                  allow: str | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            if allow is not None:
                self.send_header("Allow", allow)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # Prometheus and the controllers poll often; keep stderr for decisions

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="watch-http", daemon=True).start()
    return server
