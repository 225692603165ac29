"""The engine: a scheduler thread doing continuous batching, step by step.

Each step admits waiting requests (plan their layers, load cached prefix KV, prefill them in
length-bucketed groups and sample their first token), then decodes one step for every running
sequence (sequences with the same layer mask share one forward), then retires finished ones.
Events go to each request's sink from this thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import torch
from prometheus_client import CollectorRegistry

from layergate.reference_engine.api import EventSink, FinishEvent, GenerationRequest, TokenEvent
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.extension import build_extension
from layergate.reference_engine.loading import LoadedModel, load_model
from layergate.reference_engine.metrics import EngineMetrics, RequestRecord
from layergate.reference_engine.prefix_cache import PrefixCache
from layergate.reference_engine.runner import ForwardOutput, ModelRunner
from layergate.reference_engine.sampling import RequestSampler, SampledToken, StopChecker
from layergate.reference_engine.scheduler import (
    EngineStopped,
    QueueFull,
    RequestQueue,
    group_by,
    prefill_groups,
)
from layergate.reference_engine.sequence import SequenceState
from layergate.reference_engine.skip_policies.base import SkipPolicy, StepResult
from layergate.reference_engine.skip_policies.registry import create_skip_policy

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
        self.eos_ids = _eos_ids(self.loaded.model, self.tokenizer)
        self._queue = RequestQueue(config.max_queue)
        self._running: list[SequenceState] = []
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
        self.metrics.record_load(len(self._queue), len(self._running))

    def cancel(self, request_id: str) -> None:
        """Stop a request (its client went away); it finishes with reason `cancelled`."""
        with self._lock:
            self._cancel.add(request_id)
        self._queue.wake()

    def shutdown(self, drain: bool = True, timeout: float | None = None) -> None:
        """Stop accepting; with drain, finish what is queued and running first."""
        self._accepting = False
        if not drain:
            for seq in list(self._running):
                self.cancel(seq.request_id)
            while (item := self._queue.take(1)):
                self._reject(*item[0], "cancelled")
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
        return len(self._running)

    # ---- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        torch.set_grad_enabled(False)
        if self.config.threads:
            torch.set_num_threads(self.config.threads)
        while True:
            self._apply_cancellations()
            if not self._running and not len(self._queue):
                if self._stop:
                    return
                self._queue.wait(0.05)
                continue
            try:
                self.step()
            except Exception as exc:  # never let the engine thread die with requests in it
                log.exception("engine step failed")
                for seq in self._running:
                    if not seq.finished:
                        self._finish(seq, "error", status="error", error=str(exc))
                self._running = []

    def step(self) -> None:
        """One scheduling step: admit + prefill, decode once, retire."""
        free = self.config.max_batch_size - len(self._running)
        if free > 0:
            admitted = [s for s in (self._admit(*item) for item in self._queue.take(free)) if s]
            self._prefill(admitted)
        decoding = [s for s in self._running if not s.finished and s.first_token_at]
        if decoding:
            self._decode(decoding)
        self._running = [s for s in self._running if not s.finished]
        self.metrics.record_load(len(self._queue), len(self._running))
        if self.loaded.device.type == "cuda" and not self._running:
            torch.cuda.reset_peak_memory_stats()

    def _apply_cancellations(self) -> None:
        with self._lock:
            ids, self._cancel = self._cancel, set()
        for rid in ids:
            item = self._queue.remove(rid)
            if item is not None:
                self._reject(item[0], item[1], "cancelled")
            for seq in self._running:
                if seq.request_id == rid and not seq.finished:
                    self._finish(seq, "cancelled", status="cancelled")
        self._running = [s for s in self._running if not s.finished]
        if ids:  # the loop may go idle next: publish the freed slots now
            self.metrics.record_load(len(self._queue), len(self._running))

    # ---- admission and prefill ---------------------------------------------------------

    def _admit(self, request: GenerationRequest, sink: EventSink) -> SequenceState | None:
        now = time.perf_counter()
        try:
            prompt = request.prompt_token_ids
            plan = self.skip_policy.plan(prompt, self.runner.embed_tokens(prompt))
        except Exception as exc:  # a skip policy failure fails this request, not the engine
            log.exception("planning %s failed", request.request_id)
            self._reject(request, sink, "error", str(exc))
            return None
        cache = self.runner.new_cache(self.max_model_len)
        seq = SequenceState(request=request, sink=sink, plan=plan, cache=cache,
                            sampler=RequestSampler(request.params, self.config.seed),
                            stop=StopChecker(self.tokenizer, request.params.stop),
                            token_ids=list(prompt), admitted_at=now)
        if self.prefix_cache is not None:
            hit = self.prefix_cache.load(plan.fingerprint, prompt, seq.cache)
            seq.prefix_query_tokens = hit.query_tokens
            seq.prefix_hit_tokens = hit.hit_tokens
            self.metrics.record_prefix(hit.query_tokens, hit.hit_tokens)
        self._running.append(seq)
        return seq

    def _prefill(self, seqs: list[SequenceState]) -> None:
        if self.config.batch_invariant:
            groups = [[s] for s in seqs]
        else:
            groups = [g for by_mask in group_by(seqs, lambda s: s.mask)
                      for g in prefill_groups(by_mask, _suffix_len, self.config.padding,
                                              self.config.buckets)]
        for group in groups:
            self._guarded(group, self._prefill_group)

    def _prefill_group(self, group: list[SequenceState]) -> None:
        t0 = time.perf_counter()
        rows = [s.token_ids[s.cache.length:] for s in group]
        out = self.runner.forward(rows, [s.cache for s in group], group[0].mask)
        width = max(len(r) for r in rows)
        self._record_batch(group, out, width)
        elapsed = time.perf_counter() - t0
        for i, seq in enumerate(group):
            seq.prefill_time_s += elapsed
            seq.computed_tokens += width
            if self.prefix_cache is not None:
                self.prefix_cache.store(seq.plan.fingerprint, seq.request.prompt_token_ids,
                                        seq.cache)
            token = seq.sampler.sample(out.logits[i])
            self._accept(seq, [token], [out.layers_executed])

    # ---- decode ------------------------------------------------------------------------

    def _decode(self, seqs: list[SequenceState]) -> None:
        if self.skip_policy.custom_decode or self.config.batch_invariant:
            for seq in seqs:
                self._guarded([seq], self._decode_one)
            return
        for group in group_by(seqs, lambda s: s.mask):
            self._guarded(group, self._decode_group)

    def _decode_one(self, group: list[SequenceState]) -> None:
        seq = group[0]
        t0 = time.perf_counter()
        room = min(seq.remaining, self.max_model_len - len(seq.token_ids))
        result: StepResult = self.skip_policy.decode(self.runner, seq, room)
        seq.decode_time_s += time.perf_counter() - t0
        seq.computed_tokens += result.computed_tokens
        seq.draft_proposed += result.draft_proposed
        seq.draft_accepted += result.draft_accepted
        seq.draft_steps += result.draft_proposed > 0
        self.metrics.record_batch(1, len(result.tokens), result.computed_tokens)
        self._accept(seq, result.tokens, result.layers_executed)

    def _decode_group(self, group: list[SequenceState]) -> None:
        t0 = time.perf_counter()
        out = self.runner.forward([[s.last_token] for s in group], [s.cache for s in group],
                                  group[0].mask)
        self._record_batch(group, out, 1)
        elapsed = time.perf_counter() - t0
        for i, seq in enumerate(group):
            seq.decode_time_s += elapsed
            seq.computed_tokens += 1
            self._accept(seq, [seq.sampler.sample(out.logits[i])], [out.layers_executed])

    def _record_batch(self, group: list[SequenceState], out: ForwardOutput, width: int) -> None:
        self.metrics.record_batch(len(group), out.real_tokens, out.computed_tokens)
        act = self.runner.activation_bytes(width, max(s.cache.length for s in group))
        for seq in group:
            seq.peak_activation_bytes = max(seq.peak_activation_bytes, act)

    # ---- tokens, endings, events -------------------------------------------------------

    def _accept(self, seq: SequenceState, tokens: Sequence[SampledToken],
                layers: Sequence[int]) -> None:
        """Append new tokens one by one, ending the request at EOS / stop / length."""
        if seq.first_token_at is None:
            seq.first_token_at = time.perf_counter()
        for token, executed in zip(tokens, layers, strict=False):
            if seq.finished:
                return
            if token.token_id in self.eos_ids:
                self._finish(seq, "stop")
                return
            seq.token_ids.append(token.token_id)
            seq.output_ids.append(token.token_id)
            seq.layers_per_token.append(executed)
            text = seq.stop.push(token.token_id)
            ending = None
            if seq.stop.stopped:
                ending = "stop"
            elif seq.remaining <= 0 or len(seq.token_ids) >= self.max_model_len:
                ending = "length"
                text += seq.stop.finish()
            self._emit(seq, TokenEvent(token.token_id, text, token.logprob,
                                       self._top(token)))
            if ending:
                self._finish(seq, ending)

    def _top(self, token: SampledToken) -> dict[str, float] | None:
        if token.top_logprobs is None:
            return None
        return {self.tokenizer.decode([i]): lp for i, lp in token.top_logprobs}

    def _finish(self, seq: SequenceState, reason: str, *, status: str = "ok",
                error: str | None = None) -> None:
        seq.finished = True
        now = time.perf_counter()
        peak = self._peak_memory(seq)
        ext = build_extension(seq, policy=self.config.skip_policy, num_layers=self.num_layers,
                              fixed_mask=not self.skip_policy.custom_decode,
                              batch_invariant=self.config.batch_invariant,
                              peak_memory_bytes=peak, extra=self._report(seq))
        prompt_n = len(seq.request.prompt_token_ids)
        self._emit(seq, FinishEvent(reason, prompt_n, len(seq.output_ids), ext, error))
        arrival = seq.request.arrival_time
        skipped = sum(self.num_layers - n for n in seq.layers_per_token)
        would = len(seq.plan.would_skip) * len(seq.output_ids) if seq.plan.dry_run else 0
        self.metrics.record_request(RequestRecord(
            status=status, finish_reason=reason, prompt_tokens=prompt_n,
            generation_tokens=len(seq.output_ids),
            ttft_s=(seq.first_token_at - arrival) if seq.first_token_at else None,
            e2e_s=now - arrival, queue_time_s=ext["queue_time_s"],
            decision_time_s=seq.plan.decision_time_s,
            layers_executed=sum(seq.layers_per_token), layers_skipped=max(0, skipped),
            layers_would_skip=would, prefix_query_tokens=seq.prefix_query_tokens,
            prefix_hit_tokens=seq.prefix_hit_tokens, draft_proposed=seq.draft_proposed,
            draft_accepted=seq.draft_accepted, draft_steps=seq.draft_steps,
            peak_memory_bytes=peak))

    def _report(self, seq: SequenceState) -> dict[str, Any]:
        try:
            return self.skip_policy.report(seq)
        except Exception:
            log.exception("skip policy report failed for %s", seq.request_id)
            return {}

    def _peak_memory(self, seq: SequenceState) -> int:
        if self.loaded.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.loaded.device))
        return seq.cache.nbytes + seq.peak_activation_bytes

    def _reject(self, request: GenerationRequest, sink: EventSink, reason: str,
                error: str | None = None) -> None:
        """End a request that never ran (cancelled while waiting, or failed planning)."""
        n = len(request.prompt_token_ids)
        _safe_call(sink, FinishEvent(reason, n, 0, {}, error))
        status = "cancelled" if reason == "cancelled" else "error"
        self.metrics.requests.labels(self.config.skip_policy, status, reason).inc()

    def _emit(self, seq: SequenceState, event: TokenEvent | FinishEvent) -> None:
        _safe_call(seq.sink, event)

    def _guarded(self, group: list[SequenceState], fn) -> None:
        """Run a forward for a group; a failure ends those requests with `error`."""
        try:
            fn(group)
        except Exception as exc:
            log.exception("engine step failed for %s", [s.request_id for s in group])
            for seq in group:
                if not seq.finished:
                    self._finish(seq, "error", status="error", error=str(exc))


def _suffix_len(seq: SequenceState) -> int:
    return len(seq.token_ids) - seq.cache.length


def _eos_ids(model, tokenizer) -> frozenset[int]:
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None),
                  tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    return frozenset(ids)


def _safe_call(sink: EventSink, event: TokenEvent | FinishEvent) -> None:
    try:
        sink(event)
    except Exception:  # a broken client callback must not stop the engine
        log.exception("event sink failed")
