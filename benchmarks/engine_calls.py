"""One greedy request through an in-process Engine, timed end to end: shared by the
benchmark scripts (run as `python benchmarks/X.py`, so this imports as `engine_calls`)."""

from __future__ import annotations

import queue
import time
import uuid


def greedy_request(engine, ids: list[int], max_tokens: int,
                   timeout: float = 600) -> tuple[dict, float]:
    """Submit `ids` greedily, wait for the finish; returns (the `layergate` extension, seconds)."""
    from layergate.reference_engine.api import FinishEvent, GenerationRequest, SamplingParams

    events: queue.Queue = queue.Queue()
    start = time.perf_counter()
    engine.submit(GenerationRequest(uuid.uuid4().hex, tuple(ids),
                                    SamplingParams(max_tokens=max_tokens, temperature=0.0),
                                    start), events.put)
    while not isinstance(event := events.get(timeout=timeout), FinishEvent):
        pass
    return event.extension, time.perf_counter() - start
