"""Block-level prefix cache: hashed prompt prefixes -> KV blocks, LRU under a byte budget.

Block i of a prompt is keyed by a chain hash over the policy fingerprint and every token of
blocks 0..i, so a block is only reused after the very same prefix, computed under the very
same executed layer set (KV of one layer set is never served to another).
"""

from __future__ import annotations

import hashlib
import threading
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from layergate.reference_engine.kv_cache import SequenceKV

KVBlock = list[tuple[torch.Tensor, torch.Tensor] | None]


@dataclass(frozen=True)
class PrefixHit:
    query_tokens: int  # prompt tokens looked up
    hit_tokens: int  # prompt tokens whose KV came from the cache


def block_hashes(fingerprint: str, token_ids: Sequence[int], block: int) -> list[str]:
    """Chain hashes of the full blocks of token_ids."""
    out: list[str] = []
    h = hashlib.blake2b(fingerprint.encode(), digest_size=16).hexdigest()
    for start in range(0, len(token_ids) - block + 1, block):
        chunk = array("q", token_ids[start:start + block]).tobytes()
        h = hashlib.blake2b(h.encode() + chunk, digest_size=16).hexdigest()
        out.append(h)
    return out


class PrefixCache:
    """Thread-safe; `nbytes` stays <= `budget_bytes` (least recently used blocks go first)."""

    def __init__(self, block: int = 16, budget_bytes: int = 256 * 1024 * 1024) -> None:
        if block < 1 or budget_bytes < 0:
            raise ValueError(f"prefix cache needs block >= 1 and budget >= 0, got {block}, "
                             f"{budget_bytes}")
        self.block = block
        self.budget_bytes = budget_bytes
        self.nbytes = 0
        self.query_tokens = 0
        self.hit_tokens = 0
        self._blocks: OrderedDict[str, tuple[KVBlock, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._blocks)

    def load(self, fingerprint: str, prompt: Sequence[int], cache: SequenceKV) -> PrefixHit:
        """Copy the longest cached prefix of `prompt` into the empty `cache`; at least the
        last prompt token is always left to compute (its logits choose the first token)."""
        usable = prompt[:len(prompt) - 1]
        hit = 0
        with self._lock:
            for i, h in enumerate(block_hashes(fingerprint, usable, self.block)):
                entry = self._blocks.get(h)
                if entry is None:
                    break
                self._blocks.move_to_end(h)
                cache.load_block(i * self.block, entry[0])
                hit += self.block
            self.query_tokens += len(prompt)
            self.hit_tokens += hit
        cache.length = hit
        return PrefixHit(len(prompt), hit)

    def store(self, fingerprint: str, prompt: Sequence[int], cache: SequenceKV) -> int:
        """Keep the KV of the prompt's full blocks (after prefill); returns blocks added."""
        added = 0
        hashes = block_hashes(fingerprint, prompt, self.block)
        with self._lock:
            for i, h in enumerate(hashes):
                if h in self._blocks:
                    self._blocks.move_to_end(h)
                    continue
                kv = cache.block(i * self.block, (i + 1) * self.block)
                size = sum(k.nbytes + v.nbytes for k, v in filter(None, kv))
                if size > self.budget_bytes:
                    break
                self._blocks[h] = (kv, size)
                self.nbytes += size
                added += 1
                self._evict()
        return added

    def _evict(self) -> None:
        while self.nbytes > self.budget_bytes and self._blocks:
            _, (_, size) = self._blocks.popitem(last=False)
            self.nbytes -= size
