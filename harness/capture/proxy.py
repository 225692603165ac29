"""The capture proxy: a raw ASGI app (served by uvicorn) that forwards every request to the
upstream with httpx and streams the answer back as it arrives, byte for byte, with the
upstream's status and headers. Sampled chat / completions requests are recorded after the
answer has been sent (see `recorder.py`), so recording never delays or breaks a client.

The proxy asks the upstream for an unencoded answer (`accept-encoding: identity`) so the
recorded text can be read; it does not otherwise touch a request.
`GET /-/capture/metrics` serves the proxy's own counters.
"""

from __future__ import annotations

import json
import logging
import time

import httpx
import uvicorn
from prometheus_client import CollectorRegistry, generate_latest

from layergate.harness.capture.config import CaptureConfig
from layergate.harness.capture.recorder import CaptureStats, Recorder

log = logging.getLogger(__name__)
METRICS_PATH = "/-/capture/metrics"
# hop-by-hop headers (RFC 9110 7.6.1) and ones the proxy sets itself
_DROP_REQUEST = {b"host", b"connection", b"keep-alive", b"transfer-encoding", b"te",
                 b"upgrade", b"proxy-authorization", b"accept-encoding", b"content-length"}
_DROP_RESPONSE = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade"}


async def _read_body(receive) -> bytes:
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


async def _respond(send, status: int, body: bytes, content_type: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode())]})
    await send({"type": "http.response.body", "body": body})


def _error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "upstream_error",
                                 "code": 502}}).encode()


class CaptureProxy:
    """ASGI app; one httpx.AsyncClient for the process, opened at lifespan startup."""

    def __init__(self, config: CaptureConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.registry = registry or CollectorRegistry()
        self.stats = CaptureStats(self.registry)
        self.recorder = Recorder(config.out, self.stats, config.sample, config.redact,
                                 config.seed)
        self.client: httpx.AsyncClient | None = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if scope["type"] != "http":
            return
        if scope["path"] == METRICS_PATH:
            return await _respond(send, 200, generate_latest(self.registry),
                                  "text/plain; version=0.0.4")
        await self._forward(scope, receive, send)

    async def _lifespan(self, receive, send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.client = httpx.AsyncClient(timeout=self.config.timeout)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.client is not None:
                    await self.client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _forward(self, scope, receive, send) -> None:
        arrived = time.monotonic()
        body = await _read_body(receive)
        method, path = scope["method"], scope["path"]
        url = self.config.upstream.rstrip("/") + scope.get("raw_path", path.encode()).decode()
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode()
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _DROP_REQUEST]
        headers.append((b"accept-encoding", b"identity"))
        recording = self.recorder.wants(method, path)
        if self.client is None:
            raise RuntimeError("capture proxy: ASGI lifespan startup did not run")
        try:
            request = self.client.build_request(method, url, headers=headers, content=body)
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            self.stats.forwarded.labels("upstream_unreachable").inc()
            return await _respond(send, 502, _error_body(f"upstream {url}: {exc}"),
                                  "application/json")
        chunks: list[bytes] = []
        try:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": [(k, v) for k, v in response.headers.raw
                                    if k.decode().lower() not in _DROP_RESPONSE]})
            async for chunk in response.aiter_raw():
                if recording:
                    chunks.append(chunk)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        except httpx.HTTPError as exc:  # upstream broke mid-answer: nothing to record
            log.warning("capture: upstream failed mid-answer for %s: %s", path, exc)
            recording = False
        finally:
            await response.aclose()
        self.stats.forwarded.labels(str(response.status_code)).inc()
        if recording:
            streamed = response.headers.get("content-type", "").startswith("text/event-stream")
            self.recorder.record(path, body, response.status_code, b"".join(chunks), streamed,
                                 arrived)


def run_capture(config: CaptureConfig) -> None:
    """Serve the proxy until interrupted (Ctrl-C / SIGTERM)."""
    config.out.parent.mkdir(parents=True, exist_ok=True)
    server = uvicorn.Server(uvicorn.Config(CaptureProxy(config), host=config.host,
                                           port=config.port, log_level="warning",
                                           access_log=False, server_header=False,
                                           date_header=False, lifespan="on"))
    server.run()
