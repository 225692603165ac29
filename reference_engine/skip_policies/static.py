"""`static`: the same layers removed for every request (ShortGPT-style pruning).

The set comes from `--skip-layers` or, when none is given, from the rules file's `static.skip`
(calibration ranks layers by block influence). A skipped layer passes the residual stream
through unchanged and writes no KV.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.skip_policies.base import SkipPolicy
from layergate.reference_engine.skip_policies.decider import mask_without
from layergate.reference_engine.skip_policies.registry import register
from layergate.reference_engine.skip_policies.rules import calibrated_rules

log = logging.getLogger("layergate.skip_policies")


@register("static")
class StaticSkipPolicy(SkipPolicy):
    def __init__(self, config: EngineConfig, num_layers: int) -> None:
        super().__init__(config, num_layers)
        skip = tuple(config.skip_layers)
        if not skip:
            skip = calibrated_rules(config.rules, config.model, num_layers).static_skip
        try:
            self.mask = mask_without(skip, num_layers)
        except ValueError as exc:
            raise ValueError(f"--skip-layers: {exc}") from exc
        if not any(self.mask):
            raise ValueError(f"--skip-layers removes all {num_layers} layers")
        self.skip = tuple(sorted(set(skip)))
        if not self.skip:
            log.warning("static: the rules file's calibrated skip set is empty (no layer could "
                        "be removed within its consistency target): running full depth")

    def decide(self, prompt_ids: Sequence[int], embeddings: torch.Tensor) -> Sequence[bool]:
        return self.mask
