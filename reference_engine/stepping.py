"""One scheduling step of continuous batching: admit waiting requests (plan their layers,
load cached prefix KV), prefill them in length-bucketed groups and sample their first
token, decode one step for every running sequence (sequences with the same layer mask
share one forward), then retire finished ones. The tokens go to `Delivery`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from layergate.reference_engine.api import EventSink, GenerationRequest
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.delivery import Delivery
from layergate.reference_engine.metrics import EngineMetrics
from layergate.reference_engine.prefix_cache import PrefixCache
from layergate.reference_engine.runner import ForwardOutput, ModelRunner
from layergate.reference_engine.sampling import RequestSampler, StopChecker
from layergate.reference_engine.scheduler import group_by, prefill_groups
from layergate.reference_engine.sequence import SequenceState
from layergate.reference_engine.skip_policies.base import SkipPolicy, StepResult

log = logging.getLogger("layergate.engine")
Group = list[SequenceState]


class Stepper:
    """The running sequences and the forwards that advance them, one step at a time."""

    def __init__(self, config: EngineConfig, runner: ModelRunner, skip_policy: SkipPolicy,
                 prefix_cache: PrefixCache | None, metrics: EngineMetrics, delivery: Delivery,
                 *, tokenizer: object, max_model_len: int) -> None:
        self.config, self.runner, self.skip_policy = config, runner, skip_policy
        self.prefix_cache, self.metrics, self.delivery = prefix_cache, metrics, delivery
        self.tokenizer, self.max_model_len = tokenizer, max_model_len
        self.running: list[SequenceState] = []

    @property
    def free(self) -> int:
        """Sequences that may still be admitted this step."""
        return self.config.max_batch_size - len(self.running)

    def step(self, waiting: list[tuple[GenerationRequest, EventSink]]) -> None:
        """Admit + prefill `waiting` (at most `free` of them), decode once, retire."""
        admitted = [s for s in (self._admit(*item) for item in waiting) if s]
        if admitted:
            self._prefill(admitted)
        decoding = [s for s in self.running if not s.finished and s.first_token_at]
        if decoding:
            self._decode(decoding)
        self.retire()

    def retire(self) -> None:
        self.running = [s for s in self.running if not s.finished]

    # ---- admission and prefill ---------------------------------------------------------

    def _admit(self, request: GenerationRequest, sink: EventSink) -> SequenceState | None:
        now = time.perf_counter()
        try:
            prompt = request.prompt_token_ids
            plan = self.skip_policy.plan(prompt, self.runner.embed_tokens(prompt))
        except Exception as exc:  # a skip policy failure fails this request, not the engine
            log.exception("planning %s failed", request.request_id)
            self.delivery.reject(request, sink, "error", str(exc))
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
        self.running.append(seq)
        return seq

    def _prefill(self, seqs: Group) -> None:
        if self.config.batch_invariant:
            groups = [[s] for s in seqs]
        else:
            groups = [g for by_mask in group_by(seqs, lambda s: s.mask)
                      for g in prefill_groups(by_mask, _suffix_len, self.config.padding,
                                              self.config.buckets)]
        for group in groups:
            self._guarded(group, self._prefill_group)

    def _prefill_group(self, group: Group) -> None:
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
            self.delivery.accept(seq, [token], [out.layers_executed])

    # ---- decode ------------------------------------------------------------------------

    def _decode(self, seqs: Group) -> None:
        if self.skip_policy.custom_decode or self.config.batch_invariant:
            for seq in seqs:
                self._guarded([seq], self._decode_one)
            return
        for group in group_by(seqs, lambda s: s.mask):
            self._guarded(group, self._decode_group)

    def _decode_one(self, group: Group) -> None:
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
        self.delivery.accept(seq, result.tokens, result.layers_executed)

    def _decode_group(self, group: Group) -> None:
        t0 = time.perf_counter()
        out = self.runner.forward([[s.last_token] for s in group], [s.cache for s in group],
                                  group[0].mask)
        self._record_batch(group, out, 1)
        elapsed = time.perf_counter() - t0
        for i, seq in enumerate(group):
            seq.decode_time_s += elapsed
            seq.computed_tokens += 1
            self.delivery.accept(seq, [seq.sampler.sample(out.logits[i])],
                                 [out.layers_executed])

    def _record_batch(self, group: Group, out: ForwardOutput, width: int) -> None:
        self.metrics.record_batch(len(group), out.real_tokens, out.computed_tokens)
        act = self.runner.activation_bytes(width, max(s.cache.length for s in group))
        for seq in group:
            seq.peak_activation_bytes = max(seq.peak_activation_bytes, act)

    def _guarded(self, group: Group, forward: Callable[[Group], None]) -> None:
        """Run a forward for a group; a failure ends those requests with `error`."""
        try:
            forward(group)
        except Exception as exc:
            log.exception("engine step failed for %s", [s.request_id for s in group])
            self.delivery.fail(group, exc)


def _suffix_len(seq: SequenceState) -> int:
    return len(seq.token_ids) - seq.cache.length
