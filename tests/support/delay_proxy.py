"""A proxy that makes an arm slower by a fixed share, chunk by chunk: every byte of a
`/v1/` response is delivered at start + (1 + extra) x its upstream arrival time, so TTFT,
ITL and E2E all stretch by `extra` (streamed or not); other paths pass as they are.
`extra` may be changed while it runs (an arm that turns slow mid-run)."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx

from layergate.harness.processes import free_port


class DelayProxy:
    """Forwards to `upstream`, delivering every byte at start + (1 + extra) x its upstream
    arrival time, so TTFT, ITL and E2E all stretch by `extra` (streamed or not)."""

    def __init__(self, upstream: str, extra: float) -> None:
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        self.upstream, self.extra = upstream, extra
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> DelayProxy:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    async def handle(self, request):
        from starlette.responses import Response, StreamingResponse

        start = time.perf_counter()
        url = self.upstream + request.url.path + (f"?{request.url.query}"
                                                  if request.url.query else "")
        client = httpx.AsyncClient(timeout=None)
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() in ("content-type", "authorization", "accept")}
        upstream = await client.send(client.build_request(
            request.method, url, content=await request.body(), headers=headers), stream=True)
        if not request.url.path.startswith("/v1/"):  # health, metrics: as they are
            body = await upstream.aread()
            await client.aclose()
            return Response(body, upstream.status_code,
                            media_type=upstream.headers.get("content-type"))
        chunks: asyncio.Queue = asyncio.Queue()

        async def pump() -> None:
            try:
                async for chunk in upstream.aiter_raw():
                    await chunks.put((time.perf_counter(), chunk))
            finally:
                await chunks.put(None)
                await upstream.aclose()
                await client.aclose()

        task = asyncio.create_task(pump())

        async def delayed():
            while (item := await chunks.get()) is not None:
                arrived, chunk = item
                due = start + (1 + self.extra) * (arrived - start)
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                yield chunk
            await task

        return StreamingResponse(delayed(), upstream.status_code,
                                 media_type=upstream.headers.get("content-type"))
