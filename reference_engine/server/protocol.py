"""What the server needs from an engine (`layergate.reference_engine.engine.Engine` provides it)."""

from __future__ import annotations

from typing import Any, Protocol

from layergate.reference_engine.api import EventSink, GenerationRequest


class ServedEngine(Protocol):
    tokenizer: Any
    model_name: str
    max_model_len: int
    num_layers: int

    def start(self) -> None: ...

    def submit(self, request: GenerationRequest, sink: EventSink) -> None:
        """Queue a request; raises `QueueFull` when the bounded queue is full."""

    def cancel(self, request_id: str) -> None: ...

    def shutdown(self, drain: bool = True) -> None: ...

    @property
    def queue_depth(self) -> int: ...

    @property
    def running(self) -> int: ...
