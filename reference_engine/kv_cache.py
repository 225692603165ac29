"""Per-sequence KV cache with per-layer write accounting, and the batch view the layers see.

A sequence owns one `SequenceKV`: for every decoder layer a key and a value tensor of shape
[1, kv_heads, capacity, head_dim] and the number of positions written in that layer. A layer
the policy skipped is simply not written, so its count stays behind; `truncate` rolls every
layer back (speculative rejection). `BatchKV` is what HF's attention modules receive as their
`cache`: its `update()` writes each row's new keys into that row's `SequenceKV` and returns
the keys to attend to (right-padded to the longest row when the batch is ragged).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

_MIN_CAPACITY = 64


class SequenceKV:
    """The KV cache of one sequence. `length` is the number of committed positions: the engine
    keeps `length == len(context tokens) - 1` between steps (the last token is not fed yet)."""

    def __init__(self, num_layers: int, kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str = "cpu",
                 max_positions: int | None = None) -> None:
        self.num_layers = num_layers
        self.max_positions = max_positions  # caps the doubling of capacity
        self.kv_heads = kv_heads
        self.head_dim = head_dim
        self.dtype = dtype
        self.device = torch.device(device)
        self.length = 0
        self.layers_written = [0] * num_layers
        self._k: list[torch.Tensor | None] = [None] * num_layers
        self._v: list[torch.Tensor | None] = [None] * num_layers

    def write(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Write k, v ([kv_heads, n, head_dim] or [1, kv_heads, n, head_dim]) at positions
        start..start+n-1 of `layer`, dropping whatever that layer had from `start` on."""
        if k.dim() == 3:
            k, v = k.unsqueeze(0), v.unsqueeze(0)
        written = self.layers_written[layer]
        if start > written:
            raise ValueError(f"layer {layer}: write at position {start} leaves a hole "
                             f"(only {written} positions written)")
        end = start + k.shape[2]
        self._reserve(layer, end)
        self._k[layer][:, :, start:end] = k
        self._v[layer][:, :, start:end] = v
        self.layers_written[layer] = end

    def keys(self, layer: int, length: int | None = None) -> torch.Tensor:
        n = self.layers_written[layer] if length is None else length
        return self._k[layer][:, :, :n]

    def values(self, layer: int, length: int | None = None) -> torch.Tensor:
        n = self.layers_written[layer] if length is None else length
        return self._v[layer][:, :, :n]

    def truncate(self, length: int) -> None:
        """Forget every position >= length in every layer (speculative rollback)."""
        if length < 0:
            raise ValueError(f"truncate length must be >= 0, got {length}")
        self.layers_written = [min(n, length) for n in self.layers_written]
        self.length = min(self.length, length)

    def block(self, start: int, end: int) -> list[tuple[torch.Tensor, torch.Tensor] | None]:
        """Copies of positions [start, end) per layer (None where the layer has no KV there)."""
        out: list[tuple[torch.Tensor, torch.Tensor] | None] = []
        for layer in range(self.num_layers):
            if self.layers_written[layer] >= end:
                out.append((self._k[layer][0, :, start:end].clone(),
                            self._v[layer][0, :, start:end].clone()))
            else:
                out.append(None)
        return out

    def load_block(self, start: int,
                   kv: Sequence[tuple[torch.Tensor, torch.Tensor] | None]) -> None:
        """Write a block produced by `block()` at `start` (layers with None are left alone)."""
        for layer, pair in enumerate(kv):
            if pair is not None:
                self.write(layer, start, pair[0], pair[1])

    @property
    def nbytes(self) -> int:
        """Bytes of KV actually written (not the reserved capacity)."""
        per_pos = 2 * self.kv_heads * self.head_dim * _itemsize(self.dtype)
        return per_pos * sum(self.layers_written)

    @property
    def reserved_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._k + self._v if t is not None)

    def _reserve(self, layer: int, needed: int) -> None:
        cur = self._k[layer]
        cap = 0 if cur is None else cur.shape[2]
        if needed <= cap:
            return
        new_cap = max(_MIN_CAPACITY, 2 * cap)
        if self.max_positions is not None:
            new_cap = min(new_cap, self.max_positions)
        new_cap = max(new_cap, needed)
        shape = (1, self.kv_heads, new_cap, self.head_dim)
        k = torch.empty(shape, dtype=self.dtype, device=self.device)
        v = torch.empty(shape, dtype=self.dtype, device=self.device)
        n = self.layers_written[layer]
        if cur is not None and n:
            k[:, :, :n] = cur[:, :, :n]
            v[:, :, :n] = self._v[layer][:, :, :n]
        self._k[layer], self._v[layer] = k, v


class BatchKV:
    """The `cache` object handed to HF decoder layers for one forward over a batch.

    Row i feeds `counts[i]` real tokens at positions starts[i]..starts[i]+counts[i]-1 (the
    input is right-padded to the longest row; padded positions are never written).
    """

    def __init__(self, caches: Sequence[SequenceKV], starts: Sequence[int],
                 counts: Sequence[int]) -> None:
        self.caches = list(caches)
        self.starts = list(starts)
        self.counts = list(counts)
        self.ends = [s + n for s, n in zip(starts, counts, strict=True)]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int,
               *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        for i, cache in enumerate(self.caches):
            n = self.counts[i]
            cache.write(layer_idx, self.starts[i], key_states[i:i + 1, :, :n],
                        value_states[i:i + 1, :, :n])
        if len(self.caches) == 1:
            c = self.caches[0]
            return c.keys(layer_idx, self.ends[0]), c.values(layer_idx, self.ends[0])
        width = max(self.ends)
        b, h, _, d = key_states.shape
        keys = key_states.new_zeros((b, h, width, d))
        values = value_states.new_zeros((b, h, width, d))
        for i, cache in enumerate(self.caches):
            keys[i, :, :self.ends[i]] = cache.keys(layer_idx, self.ends[i])[0]
            values[i, :, :self.ends[i]] = cache.values(layer_idx, self.ends[i])[0]
        return keys, values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return max(self.ends)


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()
