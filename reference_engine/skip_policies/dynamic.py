"""`dynamic`: detector -> decider -> executor, one mask per request.

The detector reads cheap features off the prompt's input embeddings, the decider walks the
rules file's ordered threshold table, and the engine's executor applies the mask to every
token of the request (the mask never changes within a request, so the KV cache stays
consistent; the prefix cache keys on the mask's fingerprint).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.skip_policies.base import SkipPolicy
from layergate.reference_engine.skip_policies.decider import decide
from layergate.reference_engine.skip_policies.detector import detect
from layergate.reference_engine.skip_policies.registry import register
from layergate.reference_engine.skip_policies.rules import calibrated_rules

log = logging.getLogger("layergate.skip_policies")


@register("dynamic")
class DynamicSkipPolicy(SkipPolicy):
    def __init__(self, config: EngineConfig, num_layers: int) -> None:
        super().__init__(config, num_layers)
        self.rules = calibrated_rules(config.rules, config.model, num_layers).dynamic
        detect(torch.zeros(3, 8))  # numpy's first-call setup is paid here, not by a request
        if not self.rules:
            log.warning("dynamic: the rule table is empty (calibration found no threshold that "
                        "keeps its consistency target): every request runs full depth")

    def decide(self, prompt_ids: Sequence[int], embeddings: torch.Tensor) -> Sequence[bool]:
        return decide(detect(embeddings), self.rules, self.num_layers).mask
