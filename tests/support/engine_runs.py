"""Drive an in-process Engine from tests: submit requests, collect their events."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from layergate.reference_engine.api import (
    FinishEvent,
    GenerationRequest,
    SamplingParams,
    TokenEvent,
)


@dataclass
class Outcome:
    tokens: list[TokenEvent] = field(default_factory=list)
    finish: FinishEvent | None = None

    @property
    def token_ids(self) -> list[int]:
        return [t.token_id for t in self.tokens]

    @property
    def text(self) -> str:
        return "".join(t.text for t in self.tokens)


def run_requests(engine, prompts: Sequence[Sequence[int]], params: SamplingParams | Sequence,
                 timeout: float = 120) -> list[Outcome]:
    """Submit every prompt at once (they batch together) and wait for all to finish."""
    params_list = list(params) if isinstance(params, list | tuple) else [params] * len(prompts)
    outcomes = [Outcome() for _ in prompts]
    left = threading.Semaphore(0)

    def sink_for(o: Outcome):
        def sink(event):
            if isinstance(event, FinishEvent):
                o.finish = event
                left.release()
            else:
                o.tokens.append(event)
        return sink

    for i, (ids, p) in enumerate(zip(prompts, params_list, strict=True)):
        req = GenerationRequest(f"req-{time.monotonic_ns()}-{i}", tuple(ids), p,
                                time.perf_counter())
        engine.submit(req, sink_for(outcomes[i]))
    deadline = time.monotonic() + timeout
    for _ in prompts:
        if not left.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"requests did not finish in {timeout}s")
    return outcomes


def run_one(engine, ids: Sequence[int], params: SamplingParams) -> Outcome:
    return run_requests(engine, [ids], params)[0]
