"""The bridge from the engine thread into asyncio: one queue per request.

The engine calls `sink` from its own thread; `call_soon_threadsafe` hands each event to the
event loop that owns the queue, so the handler awaits events without polling or locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from layergate.reference_engine.api import Event, FinishEvent

_GONE = object()  # the client went away: stop reading, whatever the engine still sends


class EventStream:
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self.finished = False

    def sink(self, event: Event) -> None:
        """Called by the engine, from any thread."""
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, event)
        except RuntimeError:  # the loop is closed: the server is gone, nobody listens
            pass

    def abandon(self) -> None:
        """Called on the loop: end iteration now (the client disconnected)."""
        self._queue.put_nowait(_GONE)

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            item = await self._queue.get()
            if item is _GONE:
                return
            if isinstance(item, FinishEvent):
                self.finished = True
                yield item
                return
            yield item  # type: ignore[misc]
