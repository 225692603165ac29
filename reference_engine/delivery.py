"""What a request receives and what the metrics record of it: its sampled tokens as
TokenEvents (until EOS, a stop string or its length), its FinishEvent with the per-request
extension, and its RequestRecord. The engine thread calls it; a broken client callback
never stops the engine."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import torch

from layergate.reference_engine.api import EventSink, FinishEvent, GenerationRequest, TokenEvent
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.extension import build_extension
from layergate.reference_engine.metrics import EngineMetrics, RequestRecord
from layergate.reference_engine.sampling import SampledToken
from layergate.reference_engine.sequence import SequenceState
from layergate.reference_engine.skip_policies.base import SkipPolicy

log = logging.getLogger("layergate.engine")


class Delivery:
    """Appends tokens to a sequence and ends it, sending each request its events."""

    def __init__(self, config: EngineConfig, metrics: EngineMetrics, skip_policy: SkipPolicy,
                 *, tokenizer: Any, eos_ids: frozenset[int], max_model_len: int,
                 num_layers: int, device: torch.device) -> None:
        self.config, self.metrics, self.skip_policy = config, metrics, skip_policy
        self.tokenizer, self.eos_ids = tokenizer, eos_ids
        self.max_model_len, self.num_layers, self.device = max_model_len, num_layers, device

    def accept(self, seq: SequenceState, tokens: Sequence[SampledToken],
               layers: Sequence[int]) -> None:
        """Append new tokens one by one, ending the request at EOS / stop / length."""
        if seq.first_token_at is None:
            seq.first_token_at = time.perf_counter()
        for token, executed in zip(tokens, layers, strict=False):
            if seq.finished:
                return
            if token.token_id in self.eos_ids:
                self.finish(seq, "stop")
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
            safe_call(seq.sink, TokenEvent(token.token_id, text, token.logprob,
                                           self._top(token)))
            if ending:
                self.finish(seq, ending)

    def finish(self, seq: SequenceState, reason: str, *, status: str = "ok",
               error: str | None = None) -> None:
        """End a running request: its FinishEvent, then its record in the metrics."""
        seq.finished = True
        now = time.perf_counter()
        peak = self._peak_memory(seq)
        ext = build_extension(seq, policy=self.config.skip_policy, num_layers=self.num_layers,
                              fixed_mask=not self.skip_policy.custom_decode,
                              batch_invariant=self.config.batch_invariant,
                              peak_memory_bytes=peak, extra=self._report(seq))
        prompt_n = len(seq.request.prompt_token_ids)
        safe_call(seq.sink, FinishEvent(reason, prompt_n, len(seq.output_ids), ext, error))
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

    def reject(self, request: GenerationRequest, sink: EventSink, reason: str,
               error: str | None = None) -> None:
        """End a request that never ran (cancelled while waiting, or failed planning)."""
        n = len(request.prompt_token_ids)
        safe_call(sink, FinishEvent(reason, n, 0, {}, error))
        status = "cancelled" if reason == "cancelled" else "error"
        self.metrics.requests.labels(self.config.skip_policy, status, reason).inc()

    def fail(self, seqs: Sequence[SequenceState], exc: Exception) -> None:
        """End with `error` every one of `seqs` not finished yet (their forward raised)."""
        for seq in seqs:
            if not seq.finished:
                self.finish(seq, "error", status="error", error=str(exc))

    def _top(self, token: SampledToken) -> dict[str, float] | None:
        if token.top_logprobs is None:
            return None
        return {self.tokenizer.decode([i]): lp for i, lp in token.top_logprobs}

    def _report(self, seq: SequenceState) -> dict[str, Any]:
        try:
            return self.skip_policy.report(seq)
        except Exception:
            log.exception("skip policy report failed for %s", seq.request_id)
            return {}

    def _peak_memory(self, seq: SequenceState) -> int:
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        return seq.cache.nbytes + seq.peak_activation_bytes


def eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """The token ids that end a generation: the model's generation config's and the
    tokenizer's."""
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None),
                  tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    return frozenset(ids)


def safe_call(sink: EventSink, event: TokenEvent | FinishEvent) -> None:
    try:
        sink(event)
    except Exception:  # a broken client callback must not stop the engine
        log.exception("event sink failed")
