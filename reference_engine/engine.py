"""The engine: a scheduler thread doing continuous batching, step by step.

`Engine` is what the server holds: it queues requests, cancels them, and runs the loop on
its own thread. Each step (`stepping.Stepper`) admits waiting requests and prefills them,
decodes one step for every running sequence, then retires finished ones; `delivery.Delivery`
turns the sampled tokens into each request's events and ending. Events go to each request's
sink from this thread.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import torch
from prometheus_client import CollectorRegistry

from layergate.reference_engine.api import EventSink, GenerationRequest
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.delivery import Delivery, eos_ids
from layergate.reference_engine.loading import LoadedModel, load_model
from layergate.reference_engine.metrics import EngineMetrics
from layergate.reference_engine.prefix_cache import PrefixCache
from layergate.reference_engine.runner import ModelRunner
from layergate.reference_engine.scheduler import EngineStopped, QueueFull, RequestQueue
from layergate.reference_engine.skip_policies.base import SkipPolicy
from layergate.reference_engine.skip_policies.registry import create_skip_policy
from layergate.reference_engine.stepping import Stepper

__all__ = ["Engine", "EngineStopped", "QueueFull"]
log = logging.getLogger("layergate.engine")


class Engine:
    """Serves GenerationRequests with one loaded model and one skip policy."""

    def __init__(self, config: EngineConfig, registry: CollectorRegistry | None = None, *,
                 loaded: LoadedModel | None = None,
                 skip_policy: SkipPolicy | None = None) -> None:
        """`loaded` reuses an already loaded model (tests share weights with HF); `skip_policy`
        overrides the registry's `config.skip_policy` with an instance (tests' own policies)."""
        self.config = config
        self.loaded = loaded or load_model(config)
        self.tokenizer = self.loaded.tokenizer
        self.model_name = self.loaded.name
        self.max_model_len = config.max_model_len or self.loaded.max_model_len
        self.num_layers = self.loaded.num_layers
        self.runner = ModelRunner(self.loaded.model)
        self.skip_policy = skip_policy or create_skip_policy(config, self.num_layers)
        self.prefix_cache = (PrefixCache(config.prefix_cache_block, config.prefix_cache_bytes)
                             if config.prefix_cache == "on" else None)
        self.metrics = EngineMetrics(registry or CollectorRegistry(), config.skip_policy)
        self.eos_ids = eos_ids(self.loaded.model, self.tokenizer)
        self._delivery = Delivery(config, self.metrics, self.skip_policy,
                                  tokenizer=self.tokenizer, eos_ids=self.eos_ids,
                                  max_model_len=self.max_model_len,
                                  num_layers=self.num_layers, device=self.loaded.device)
        self._steps = Stepper(config, self.runner, self.skip_policy, self.prefix_cache,
                              self.metrics, self._delivery, tokenizer=self.tokenizer,
                              max_model_len=self.max_model_len)
        self._queue = RequestQueue(config.max_queue)
        self._cancel: set[str] = set()
        self._lock = threading.Lock()
        self._accepting = True
        self._stop = False
        self._thread: threading.Thread | None = None

    # ---- the API the server uses -------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="layergate-engine",
                                            daemon=True)
            self._thread.start()

    def submit(self, request: GenerationRequest, sink: EventSink) -> None:
        """Queue a request. Raises QueueFull when the queue is full or the engine stopping,
        ValueError when the prompt cannot be served (empty, too long, unknown token ids)."""
        prompt = request.prompt_token_ids
        if not prompt:
            raise ValueError("the prompt is empty")
        if len(prompt) >= self.max_model_len:
            raise ValueError(f"the prompt has {len(prompt)} tokens; the context is "
                             f"{self.max_model_len}")
        if min(prompt) < 0 or max(prompt) >= self.runner.vocab_size:
            raise ValueError(f"prompt token ids must be in [0, {self.runner.vocab_size})")
        if not self._accepting:
            self.metrics.rejected()
            raise QueueFull("the engine is shutting down")
        try:
            self._queue.put(request, sink)
        except QueueFull:
            self.metrics.rejected()
            raise
        self.metrics.record_load(len(self._queue), self.running)

    def cancel(self, request_id: str) -> None:
        """Stop a request (its client went away); it finishes with reason `cancelled`."""
        with self._lock:
            self._cancel.add(request_id)
        self._queue.wake()

    def shutdown(self, drain: bool = True, timeout: float | None = None) -> None:
        """Stop accepting; with drain, finish what is queued and running first."""
        self._accepting = False
        if not drain:
            for seq in list(self._steps.running):
                self.cancel(seq.request_id)
            while (item := self._queue.take(1)):
                self._delivery.reject(*item[0], "cancelled")
        self._stop = True
        self._queue.wake()
        if self._thread is not None:
            self._thread.join(timeout)

    def describe(self) -> dict[str, Any]:
        """The whole config and the pinned numerics, for run manifests and logs."""
        return {"model": self.model_name, "path": str(self.loaded.path),
                "layers": self.num_layers, "max_model_len": self.max_model_len,
                "numerics": dict(self.loaded.numerics), "config": self.config.to_dict()}

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    @property
    def running(self) -> int:
        return len(self._steps.running)

    # ---- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        torch.set_grad_enabled(False)
        if self.config.threads:
            torch.set_num_threads(self.config.threads)
        while True:
            self._apply_cancellations()
            if not self._steps.running and not len(self._queue):
                if self._stop:
                    return
                self._queue.wait(0.05)
                continue
            try:
                self.step()
            except Exception as exc:  # never let the engine thread die with requests in it
                log.exception("engine step failed")
                self._delivery.fail(self._steps.running, exc)
                self._steps.running = []

    def step(self) -> None:
        """One scheduling step: admit + prefill, decode once, retire."""
        free = self._steps.free
        self._steps.step(self._queue.take(free) if free > 0 else [])
        self.metrics.record_load(len(self._queue), self.running)
        if self.loaded.device.type == "cuda" and not self._steps.running:
            torch.cuda.reset_peak_memory_stats()

    def _apply_cancellations(self) -> None:
        with self._lock:
            ids, self._cancel = self._cancel, set()
        for rid in ids:
            item = self._queue.remove(rid)
            if item is not None:
                self._delivery.reject(item[0], item[1], "cancelled")
            for seq in self._steps.running:
                if seq.request_id == rid and not seq.finished:
                    self._delivery.finish(seq, "cancelled", status="cancelled")
        self._steps.retire()
        if ids:  # the loop may go idle next: publish the freed slots now
            self.metrics.record_load(len(self._queue), self.running)
