"""The detector of `dynamic`: cheap features of a prompt, computed on its input embeddings.

No layer runs here: the features come from the embedding rows the model looks up anyway, so
deciding costs microseconds. Per position t (embedding e_t, hidden size d):

- local variance: the variance of e_{t-1}, e_t, e_{t+1} around their mean, averaged over d
  (how fast the prompt's content changes locally);
- gradient magnitude: ||e_t - e_{t-1}|| / sqrt(d) (an RMS step between neighbours);

each pooled to max and mean, plus the prompt length in tokens.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

FEATURES = ("prompt_len", "var_max", "var_mean", "grad_max", "grad_mean")


@dataclass(frozen=True)
class Features:
    prompt_len: int
    var_max: float
    var_mean: float
    grad_max: float
    grad_mean: float

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


@torch.inference_mode()
def detect(embeddings: torch.Tensor) -> Features:
    """Features of one prompt from its input embeddings, [T, d] (or [1, T, d])."""
    e = embeddings[0] if embeddings.dim() == 3 else embeddings
    if e.dim() != 2 or e.shape[0] == 0:
        raise ValueError(f"detect needs [T, d] embeddings with T >= 1, got {tuple(e.shape)}")
    e = e.float()
    t = e.shape[0]
    if t == 1:
        return Features(1, 0.0, 0.0, 0.0, 0.0)
    # windows of three neighbours, edges padded by repeating the end rows
    padded = torch.cat([e[:1], e, e[-1:]])
    window = torch.stack([padded[:-2], padded[1:-1], padded[2:]])  # [3, T, d]
    local_var = window.var(dim=0, unbiased=False).mean(dim=-1)  # [T]
    grad = (e[1:] - e[:-1]).pow(2).mean(dim=-1).sqrt()  # [T - 1]
    stats = torch.stack([local_var.max(), local_var.mean(), grad.max(), grad.mean()]).tolist()
    return Features(t, *stats)
