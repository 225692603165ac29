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

The server is the shared one (exporters/metrics_server.py); these are its other routes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry

from layergate.exporters.metrics_server import MetricsServer, WsgiApp, serve_metrics
from layergate.harness.watch.board import Board
from layergate.harness.watch.flagger import HOOKS, Payload

FLAGGER = "/flagger/"

# (status code, JSON body, the Allow header or None)
Answer = tuple[int, dict, str | None]


def serve(board: Board, registry: CollectorRegistry, host: str, port: int) -> MetricsServer:
    """Start answering on host:port in a daemon thread; `stop()` stops it."""
    return serve_metrics(registry, host, port, routes=_routes(board), name="watch-http")


def _routes(board: Board) -> WsgiApp:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        code, body, allow = _answer(board, environ)
        data = (json.dumps(body) + "\n").encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        if allow is not None:
            headers.append(("Allow", allow))
        start_response(f"{code} {HTTPStatus(code).phrase}", headers)
        return [data]

    return app


def _answer(board: Board, environ: dict[str, Any]) -> Answer:
    method, path = environ["REQUEST_METHOD"], environ["PATH_INFO"]
    if method == "POST":
        return _post(board, path, environ)
    if method != "GET":
        return 501, {"error": f"unsupported method {method}"}, None
    if path.startswith(FLAGGER):
        return 405, {"error": "Flagger webhooks are POSTed; a GET would be taken for "
                     "Flagger asking"}, "POST"
    return _get(board, path, parse_qs(environ.get("QUERY_STRING", "")))


def _post(board: Board, path: str, environ: dict[str, Any]) -> Answer:
    if not path.startswith(FLAGGER):
        return 405, {"error": f"{path} answers GET only"}, "GET"
    hook = path.removeprefix(FLAGGER)
    if hook not in HOOKS:
        return 404, {"error": f"no Flagger hook {path}; use {', '.join(HOOKS)}"}, None
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        payload = Payload.parse(environ["wsgi.input"].read(length) if length > 0 else b"")
    except ValueError as exc:
        return 400, {"error": f"{path}: {exc}"}, None
    got = board.flagger(hook, payload)
    return got.code, {"verdict": board.snapshot().status.verdict, "message": got.message}, None


def _get(board: Board, path: str, query: dict[str, list[str]]) -> Answer:
    if path == "/status":
        stage = query.get("stage", [None])[0]
        revision = query.get("revision", [""])[0].strip()
        try:
            value = None if stage is None else float(stage)
        except ValueError:
            return 400, {"error": f"stage must be a number, got {stage!r}"}, None
        if revision.startswith("{{"):  # Argo left the argument unresolved
            return 400, {"error": f"revision {revision!r} is an unresolved "
                         "AnalysisTemplate argument"}, None
        return 200, board.argo(value, revision), None
    if path == "/health":
        return 200, {"status": "ok"}, None
    return 404, {"error": f"no route {path}; see /status, /metrics, /flagger/<hook>"}, None
