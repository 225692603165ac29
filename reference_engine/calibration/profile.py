"""Per-layer profile over calibration traffic.

- block influence BI = 1 - cos(h_in, h_out), averaged over every token position (ShortGPT);
- near-zero share: share of the layer's residual update entries with |h_out - h_in| < 1e-5;
- decode share: the layer's share of measured full-depth decode time (head and norm included
  in the total, so the shares of the 30 layers sum to less than 1);
- drift: mean KL(full || skipped) of the next-token distribution over the output positions
  when this layer alone is skipped (on the first `drift_prompts` prompts).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from layergate.reference_engine.calibration.reference import Reference, teacher_forced
from layergate.reference_engine.runner import ModelRunner
from layergate.reference_engine.skip_policies.decider import mask_without

NEAR_ZERO = 1e-5


@dataclass(frozen=True)
class LayerProfile:
    layer: int
    block_influence: float
    near_zero_share: float
    decode_share: float
    drift_kl: float


def hidden_stats(hidden: Sequence[torch.Tensor]) -> tuple[list[float], list[float]]:
    """(BI per layer, near-zero share per layer) from the runner's hidden states."""
    bi, near = [], []
    for h_in, h_out in zip(hidden[:-1], hidden[1:], strict=True):
        a, b = h_in[0].float(), h_out[0].float()
        bi.append(float(1.0 - torch.nn.functional.cosine_similarity(a, b, dim=-1).mean()))
        near.append(float(((b - a).abs() < NEAR_ZERO).float().mean()))
    return bi, near


def kl(full_logits: torch.Tensor, other_logits: torch.Tensor) -> float:
    """Mean over positions of KL(p_full || p_other)."""
    p = torch.log_softmax(full_logits.float(), dim=-1)
    q = torch.log_softmax(other_logits.float(), dim=-1)
    return float((p.exp() * (p - q)).sum(dim=-1).mean())


def profile_layers(runner: ModelRunner, refs: Sequence[Reference], layer_s: Sequence[float],
                   head_s: float, drift_prompts: int,
                   tick: Callable[[], None] = lambda: None) -> list[LayerProfile]:
    n = runner.num_layers
    full = (True,) * n
    bi_sum, near_sum = [0.0] * n, [0.0] * n
    drift_sum = [0.0] * n
    drift_refs = refs[:drift_prompts]
    for index, ref in enumerate(refs):
        logits, out = teacher_forced(runner, ref, full, return_hidden=True)
        bi, near = hidden_stats(out.hidden)
        bi_sum = [s + x for s, x in zip(bi_sum, bi, strict=True)]
        near_sum = [s + x for s, x in zip(near_sum, near, strict=True)]
        tick()
        if index < len(drift_refs):
            for layer in range(n):
                skipped, _ = teacher_forced(runner, ref, mask_without([layer], n))
                drift_sum[layer] += kl(logits, skipped)
                tick()
    total = sum(layer_s) + head_s
    return [LayerProfile(i, bi_sum[i] / len(refs), near_sum[i] / len(refs),
                         layer_s[i] / total if total else 0.0,
                         drift_sum[i] / max(len(drift_refs), 1)) for i in range(n)]


def rank_by_influence(profile: Sequence[LayerProfile]) -> list[int]:
    """Layer indices, least influential first (ties broken by lower drift)."""
    return [p.layer for p in sorted(profile, key=lambda p: (p.block_influence, p.drift_kl))]


def write_layers_csv(profile: Sequence[LayerProfile], path: Path) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=[f.name for f in fields(LayerProfile)])
        writer.writeheader()
        for row in profile:
            writer.writerow(asdict(row))
    return path
