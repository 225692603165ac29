"""The layer seam: the decoder run explicitly, one layer at a time, under a layer mask.

    h = embed(ids)
    for i, layer in enumerate(layers):
        if mask[i]:
            h = layer(h, ...)      # a skipped layer leaves the residual stream unchanged
    logits = lm_head(norm(h))

The layers, norm, rotary embedding and head are the Hugging Face modules of the loaded model,
so the arithmetic is HF's own; the KV cache is ours (`kv_cache.SequenceKV`). Every skip policy
plugs in here, through `layer_mask` and `exit_after`; the runner counts the layers it actually
executed and returns the count (the executor counts, nothing is inferred from the mask later).

Usage (one decode step of one sequence whose cache holds `cache.length` positions):

    out = runner.forward([[last_token]], [cache], mask)
    out.logits[0]            # [vocab] float32 logits of the next token
    out.layers_executed      # e.g. 30 with a full mask

Speculative drafting and verification use the same call: draft with a reduced mask (or
`exit_after=k`), verify several tokens at once with `logits_for="all"` and roll back rejected
positions with `cache.truncate(n)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from layergate.reference_engine.kv_cache import BatchKV, SequenceKV


@dataclass(frozen=True)
class ForwardOutput:
    """What one `ModelRunner.forward` produced.

    logits: float32; [B, vocab] for logits_for="last" (each row's last real token), [B, T, vocab]
      for "all" (positions past a row's real tokens are padding: ignore them).
    layers_executed: decoder layers executed for every real token of this forward (the same
      for every row: one mask per forward).
    computed_tokens: token positions computed, padding included (B * T).
    real_tokens: real token positions (sum of the rows' token counts).
    hidden: with return_hidden=True, B x T x hidden tensors: index 0 after the embedding and
      index i + 1 after layer i (a skipped layer repeats its input); else None.
    """

    logits: torch.Tensor
    layers_executed: int
    computed_tokens: int
    real_tokens: int
    hidden: tuple[torch.Tensor, ...] | None = None


class ModelRunner:
    """Runs a Hugging Face Llama-family causal LM layer by layer with our KV cache."""

    def __init__(self, model: torch.nn.Module) -> None:
        inner = getattr(model, "model", None)
        layers = getattr(inner, "layers", None)
        if layers is None or getattr(model, "lm_head", None) is None:
            raise ValueError(f"{type(model).__name__} has no model.layers / lm_head: "
                             "not a Llama-family causal LM")
        self.model = model
        self.embed = inner.embed_tokens
        self.layers = list(layers)
        self.norm = inner.norm
        self.rotary = inner.rotary_emb
        self.lm_head = model.lm_head
        cfg = model.config
        self.num_layers = len(self.layers)
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.hidden_size = cfg.hidden_size
        self.vocab_size = cfg.vocab_size
        self.dtype = next(model.parameters()).dtype
        self.device = next(model.parameters()).device

    def new_cache(self, max_positions: int | None = None) -> SequenceKV:
        """An empty KV cache for one sequence (capacity grows up to max_positions)."""
        return SequenceKV(self.num_layers, self.kv_heads, self.head_dim, self.dtype, self.device,
                          max_positions)

    @property
    def kv_bytes_per_token(self) -> int:
        """KV bytes one position takes when every layer is executed."""
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        return 2 * self.num_layers * self.kv_heads * self.head_dim * itemsize

    def activation_bytes(self, width: int, keys: int) -> int:
        """An estimate of one row's transient tensors in a forward of `width` tokens over
        `keys` positions: residual stream and norms, q/k/v/o, the MLP's intermediate
        activations, attention scores, one row of logits."""
        cfg = self.model.config
        item = torch.empty((), dtype=self.dtype).element_size()
        per_token = 6 * self.hidden_size + 3 * cfg.intermediate_size
        scores = cfg.num_attention_heads * width * max(keys, width)
        return item * (width * per_token + scores) + 4 * self.vocab_size

    @torch.inference_mode()
    def embed_tokens(self, token_ids: Sequence[int]) -> torch.Tensor:
        """The input embeddings of a token sequence, [T, hidden] (for policy detectors)."""
        ids = torch.tensor([list(token_ids)], dtype=torch.long, device=self.device)
        return self.embed(ids)[0]

    @torch.inference_mode()
    def forward(self, token_ids: Sequence[Sequence[int]], caches: Sequence[SequenceKV],
                layer_mask: Sequence[bool], *, starts: Sequence[int] | None = None,
                logits_for: str = "last", exit_after: int | None = None,
                return_hidden: bool = False) -> ForwardOutput:
        """Feed row i's tokens at positions starts[i].. (default: caches[i].length) and
        write their KV into caches[i] for every executed layer; afterwards
        caches[i].length == starts[i] + len(token_ids[i]).

        layer_mask: one bool per decoder layer, True = execute. exit_after: stop after this
        layer index (early exit; later layers count as skipped). logits_for: "last" | "all".
        """
        rows = [list(r) for r in token_ids]
        if len(rows) != len(caches) or not rows or any(not r for r in rows):
            raise ValueError("forward needs one non-empty token row per cache")
        if len(layer_mask) != self.num_layers:
            raise ValueError(f"layer_mask has {len(layer_mask)} entries, the model has "
                             f"{self.num_layers} layers")
        if logits_for not in ("last", "all"):
            raise ValueError(f"logits_for must be 'last' or 'all', got {logits_for!r}")
        starts = [c.length for c in caches] if starts is None else list(starts)
        counts = [len(r) for r in rows]
        width = max(counts)
        ids = torch.zeros((len(rows), width), dtype=torch.long, device=self.device)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        positions = (torch.tensor(starts, device=self.device)[:, None]
                     + torch.arange(width, device=self.device)[None, :])
        h = self.embed(ids)
        rope = self.rotary(h, positions)
        mask = self._attention_mask(starts, counts, width, h.dtype)
        kv = BatchKV(caches, starts, counts)
        hidden = [h] if return_hidden else None
        executed = 0
        for i, layer in enumerate(self.layers):
            if layer_mask[i] and (exit_after is None or i <= exit_after):
                h = layer(h, attention_mask=mask, position_ids=positions, cache=kv,
                          use_cache=True, position_embeddings=rope)
                executed += 1
            if hidden is not None:
                hidden.append(h)
        for c, s, n in zip(caches, starts, counts, strict=True):
            c.length = s + n
        if logits_for == "last":
            last = torch.tensor([n - 1 for n in counts], device=self.device)
            h = h[torch.arange(len(rows), device=self.device), last]
        logits = self.lm_head(self.norm(h)).float()
        return ForwardOutput(logits=logits, layers_executed=executed,
                             computed_tokens=len(rows) * width, real_tokens=sum(counts),
                             hidden=tuple(hidden) if hidden is not None else None)

    def _attention_mask(self, starts: list[int], counts: list[int], width: int,
                        dtype: torch.dtype) -> torch.Tensor | None:
        """None when SDPA's own causal handling is exact (what HF generate does for one
        unpadded sequence); else an additive [B, 1, T, K] mask: row i's query q (position
        starts[i] + q) sees key j iff j <= min(starts[i] + q, starts[i] + counts[i] - 1)."""
        uniform = len(set(starts)) == 1 and all(n == width for n in counts)
        if uniform and (starts[0] == 0 or width == 1):
            return None
        ends = torch.tensor([s + n for s, n in zip(starts, counts, strict=True)],
                            device=self.device)
        q_pos = torch.tensor(starts, device=self.device)[:, None] + torch.arange(
            width, device=self.device)[None, :]
        limit = torch.minimum(q_pos, (ends - 1)[:, None])
        keys = torch.arange(int(ends.max()), device=self.device)
        visible = keys[None, None, :] <= limit[:, :, None]
        mask = torch.zeros(visible.shape, dtype=dtype, device=self.device)
        mask.masked_fill_(~visible, torch.finfo(dtype).min)
        return mask[:, None]
