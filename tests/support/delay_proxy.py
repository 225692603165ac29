"""A proxy that makes an arm slower by a fixed share, chunk by chunk: every byte of a
`/v1/` response is delivered at start + (1 + extra) x its upstream arrival time, so TTFT,
ITL and E2E all stretch by `extra` (streamed or not); other paths pass as they are.
`extra` may be changed while it runs (an arm that turns slow mid-run)."""

from __future__ import annotations

import asyncio
import time

from .asgi_proxy import AsgiProxy


class DelayProxy(AsgiProxy):
    """Forwards to `upstream`, delivering every byte at start + (1 + extra) x its upstream
    arrival time, so TTFT, ITL and E2E all stretch by `extra` (streamed or not)."""

    def __init__(self, upstream: str, extra: float) -> None:
        super().__init__(upstream)
        self.extra = extra

    async def handle(self, request):
        from starlette.responses import StreamingResponse

        start = time.perf_counter()
        client, upstream = await self.open_upstream(request)
        if not request.url.path.startswith("/v1/"):  # health, metrics: as they are
            return await self.whole(client, upstream)
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
