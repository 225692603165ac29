"""The lifecycle the test proxies share: a Starlette app on a free loopback port, served by
uvicorn in a daemon thread, started on `with` entry and stopped on exit. A subclass gives
`handle(request)` for every path."""

from __future__ import annotations

import threading
import time
from typing import Self

from layergate.harness.processes import free_port


class AsgiProxy:
    def __init__(self, upstream: str) -> None:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.upstream = upstream
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    async def handle(self, request):  # noqa: ANN001, ANN201 (starlette's types)
        raise NotImplementedError

    async def open_upstream(self, request):  # noqa: ANN001, ANN201 (starlette's types)
        """(client, the upstream's streamed response) for `request` forwarded as it came:
        its method, path, query, body and the headers an OpenAI server reads."""
        import httpx

        url = self.upstream + request.url.path + (f"?{request.url.query}"
                                                  if request.url.query else "")
        client = httpx.AsyncClient(timeout=None)
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() in ("content-type", "authorization", "accept")}
        upstream = await client.send(client.build_request(
            request.method, url, content=await request.body(), headers=headers), stream=True)
        return client, upstream

    @staticmethod
    async def whole(client, upstream):  # noqa: ANN001, ANN205 (starlette's types)
        """The upstream's answer passed on whole."""
        from starlette.responses import Response

        body = await upstream.aread()
        await upstream.aclose()
        await client.aclose()
        return Response(body, upstream.status_code,
                        media_type=upstream.headers.get("content-type"))

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
