"""The engine's mutable state of one running request (owned by the engine thread)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from layergate.reference_engine.api import EventSink, GenerationRequest
from layergate.reference_engine.kv_cache import SequenceKV
from layergate.reference_engine.sampling import RequestSampler, StopChecker

if TYPE_CHECKING:
    from layergate.reference_engine.skip_policies.base import LayerPlan


@dataclass
class SequenceState:
    """One request in flight.

    Invariant between steps: `cache.length == len(token_ids) - 1`; the last token
    (`last_token`) is sampled but not fed yet, so a decode step feeds it at `cache.length`.
    """

    request: GenerationRequest
    sink: EventSink
    plan: LayerPlan
    cache: SequenceKV
    sampler: RequestSampler
    stop: StopChecker
    token_ids: list[int] = field(default_factory=list)  # prompt + output
    output_ids: list[int] = field(default_factory=list)
    layers_per_token: list[int] = field(default_factory=list)
    admitted_at: float = 0.0
    first_token_at: float | None = None
    prefill_time_s: float = 0.0
    decode_time_s: float = 0.0
    computed_tokens: int = 0
    prefix_query_tokens: int = 0
    prefix_hit_tokens: int = 0
    draft_proposed: int = 0
    draft_accepted: int = 0
    draft_steps: int = 0  # verification passes that checked a draft (vLLM's "drafts")
    peak_activation_bytes: int = 0
    finished: bool = False

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def last_token(self) -> int:
        return self.token_ids[-1]

    @property
    def mask(self) -> tuple[bool, ...]:
        return self.plan.mask

    @property
    def remaining(self) -> int:
        """Output tokens this request may still produce."""
        return self.request.params.max_tokens - len(self.output_ids)
