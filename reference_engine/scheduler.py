"""Admission and grouping: a bounded waiting queue, and which sequences share a forward.

Prefill groups pad only within length buckets (`padding=bucketed`: a 20-token prompt is never
padded to a 900-token one) or pad everything admitted together to its longest (`max`).
Decode groups are sequences with the same layer mask (one mask per forward).
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from layergate.reference_engine.api import EventSink, GenerationRequest

T = TypeVar("T")


class QueueFull(Exception):
    """The bounded waiting queue is full (the server answers 429 + Retry-After)."""


class EngineStopped(RuntimeError):
    """The engine is shutting down and accepts no new requests."""


class RequestQueue:
    """FIFO of waiting (request, sink) pairs, bounded at `limit`; thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: deque[tuple[GenerationRequest, EventSink]] = deque()
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, request: GenerationRequest, sink: EventSink) -> None:
        with self._cond:
            if len(self._items) >= self.limit:
                raise QueueFull(f"{len(self._items)} requests waiting (limit {self.limit})")
            self._items.append((request, sink))
            self._cond.notify()

    def take(self, n: int) -> list[tuple[GenerationRequest, EventSink]]:
        with self._cond:
            out = []
            while self._items and len(out) < n:
                out.append(self._items.popleft())
            return out

    def remove(self, request_id: str) -> tuple[GenerationRequest, EventSink] | None:
        with self._cond:
            for item in self._items:
                if item[0].request_id == request_id:
                    self._items.remove(item)
                    return item
        return None

    def wait(self, timeout: float) -> None:
        """Block until something arrives (or `wake()` / timeout)."""
        with self._cond:
            if not self._items:
                self._cond.wait(timeout)

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


def bucket_of(length: int, buckets: tuple[int, ...]) -> int:
    """The smallest bucket boundary >= length (lengths past the last share one bucket)."""
    i = bisect.bisect_left(buckets, length)
    return buckets[i] if i < len(buckets) else buckets[-1] * 2


def prefill_groups(items: Iterable[T], length: Callable[[T], int], padding: str,
                   buckets: tuple[int, ...]) -> list[list[T]]:
    """Split sequences to prefill into forwards: one per length bucket, or one for all."""
    items = list(items)
    if padding == "max":
        return [items] if items else []
    groups: dict[int, list[T]] = {}
    for item in items:
        groups.setdefault(bucket_of(length(item), buckets), []).append(item)
    return [groups[k] for k in sorted(groups)]


def group_by(items: Iterable[T], key: Callable[[T], Hashable]) -> list[list[T]]:
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return list(groups.values())
