"""`dynamic`: detector -> decider -> executor, one mask per request.

The detector reads cheap features off the prompt's input embeddings, the decider walks the
rules file's ordered threshold table, and the engine's executor applies the mask to every
token of the request (the mask never changes within a request, so the KV cache stays
consistent; the prefix cache keys on the mask's fingerprint).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from reference_engine.config import EngineConfig
from reference_engine.policies.base import Policy
from reference_engine.policies.decider import decide
from reference_engine.policies.detector import detect
from reference_engine.policies.registry import register
from reference_engine.policies.rules import rules_for


@register("dynamic")
class DynamicPolicy(Policy):
    def __init__(self, config: EngineConfig, num_layers: int) -> None:
        super().__init__(config, num_layers)
        self.rules = rules_for(config.rules, config.model, num_layers).dynamic

    def decide(self, prompt_ids: Sequence[int], embeddings: torch.Tensor) -> Sequence[bool]:
        return decide(detect(embeddings), self.rules, self.num_layers).mask
