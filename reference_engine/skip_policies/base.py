"""What a skip policy is: a per-request layer plan, and optionally its own decode step.

A skip policy subclass registers itself (`@register("name")` from
`layergate.reference_engine.skip_policies.registry`; bundled ones are listed there) and overrides:

- `decide(prompt_ids, embeddings) -> mask` (detector + decider): one bool per decoder layer,
  True = execute. Called once per request, before prefill; `plan()` wraps it, times it,
  applies dry-run (the decision is reported, the full mask executed) and fingerprints the
  executed layer set (the prefix-cache key includes the fingerprint).
- `decode(runner, seq, max_new) -> StepResult` (only skip policies that change the decode step,
  e.g. speculative: draft γ tokens with fewer layers, verify with all): produce one or more
  next tokens of one sequence. Set `custom_decode = True` so the engine calls it per
  sequence instead of its own batched one-token step. Keep the cache invariant
  `seq.cache.length == len(seq.token_ids) - 1` on return (the engine appends the returned
  tokens to `seq.token_ids`): roll rejected drafts back with `seq.cache.truncate(n)`.
- `report(seq) -> dict` (optional): extra keys merged into the response's `layergate` object.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.runner import ModelRunner
from layergate.reference_engine.sampling import SampledToken
from layergate.reference_engine.sequence import SequenceState


def mask_fingerprint(mask: Sequence[bool]) -> str:
    """A short stable hash of an executed layer set."""
    bits = "".join("1" if m else "0" for m in mask)
    return hashlib.sha256(bits.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class LayerPlan:
    """The layers a request runs. mask: executed layers; would_skip: what a dry run would
    have skipped (empty otherwise); fingerprint: of the executed set (prefix-cache key)."""

    mask: tuple[bool, ...]
    fingerprint: str
    decision_time_s: float = 0.0
    dry_run: bool = False
    would_skip: tuple[int, ...] = ()

    @property
    def layers_executed(self) -> int:
        return sum(self.mask)

    @property
    def theoretical_saving(self) -> float:
        return 1.0 - self.layers_executed / len(self.mask)


@dataclass(frozen=True)
class StepResult:
    """One decode step of one sequence.

    tokens: the new tokens, in order (the engine applies EOS / stop / max_tokens and drops
      what follows an ending). layers_executed: per new token, layers executed for it.
    computed_tokens: positions computed, rejected drafts included.
    """

    tokens: tuple[SampledToken, ...]
    layers_executed: tuple[int, ...]
    computed_tokens: int
    draft_proposed: int = 0
    draft_accepted: int = 0


class SkipPolicy:
    """Base skip policy: executes every layer. One instance serves every request of an engine."""

    name: ClassVar[str] = ""
    custom_decode: ClassVar[bool] = False

    def __init__(self, config: EngineConfig, num_layers: int) -> None:
        self.config = config
        self.num_layers = num_layers

    def decide(self, prompt_ids: Sequence[int], embeddings: torch.Tensor) -> Sequence[bool]:
        """Detector + decider: one bool per layer, True = execute. Default: every layer."""
        return (True,) * self.num_layers

    def plan(self, prompt_ids: Sequence[int], embeddings: torch.Tensor) -> LayerPlan:
        """Time `decide`, validate its mask, apply dry-run, fingerprint the executed set."""
        t0 = time.perf_counter()
        decided = tuple(bool(m) for m in self.decide(prompt_ids, embeddings))
        elapsed = time.perf_counter() - t0
        if len(decided) != self.num_layers:
            raise ValueError(f"skip policy {self.name!r} returned a mask of {len(decided)} layers, "
                             f"the model has {self.num_layers}")
        if not any(decided):
            raise ValueError(f"skip policy {self.name!r} skipped every layer")
        skipped = tuple(i for i, m in enumerate(decided) if not m)
        if self.config.dry_run:
            full = (True,) * self.num_layers
            return LayerPlan(full, mask_fingerprint(full), elapsed, True, skipped)
        return LayerPlan(decided, mask_fingerprint(decided), elapsed)

    def decode(self, runner: ModelRunner, seq: SequenceState, max_new: int) -> StepResult:
        """The plain step: feed the last token under the plan's mask, sample one token."""
        out = runner.forward([[seq.last_token]], [seq.cache], seq.mask)
        token = seq.sampler.sample(out.logits[0])
        return StepResult((token,), (out.layers_executed,), out.computed_tokens)

    def report(self, seq: SequenceState) -> dict[str, Any]:
        """Extra `layergate` extension keys for this request (default: none)."""
        return {}
