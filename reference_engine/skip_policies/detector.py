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

import numpy as np
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


def detect(embeddings: torch.Tensor) -> Features:
    """Features of one prompt from its input embeddings, [T, d] (or [1, T, d])."""
    e = embeddings[0] if embeddings.dim() == 3 else embeddings
    if e.dim() != 2 or e.shape[0] == 0:
        raise ValueError(f"detect needs [T, d] embeddings with T >= 1, got {tuple(e.shape)}")
    # numpy, not torch: on these tiny arrays torch's per-op overhead is ~15x the arithmetic
    x = e.detach().to("cpu", torch.float32).numpy()
    t = x.shape[0]
    if t == 1:
        return Features(1, 0.0, 0.0, 0.0, 0.0)
    # windows of three neighbours (edges repeat the end rows): var = E[x^2] - E[x]^2, from
    # running sums rather than a stacked copy (~6x cheaper)
    padded = np.concatenate([x[:1], x, x[-1:]])
    sq = padded * padded
    s1 = padded[:-2] + padded[1:-1] + padded[2:]
    s2 = sq[:-2] + sq[1:-1] + sq[2:]
    local_var = (s2.mean(axis=-1) - np.square(s1).mean(axis=-1) / 3) / 3  # [T]
    step = x[1:] - x[:-1]
    grad = np.sqrt(np.einsum("ij,ij->i", step, step) / x.shape[1])  # [T - 1]
    return Features(t, float(local_var.max()), float(local_var.mean()), float(grad.max()),
                    float(grad.mean()))
