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

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
