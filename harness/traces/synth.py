"""Prompts of an exact length in tokens of one tokenizer, the same for the same seed.

The text is made of words that are each one token and stay one token next to any other
(` the`, ` cat`: a leading space and lowercase letters, which byte-level and metaspace
pre-tokenizers split apart before merging), so n words are exactly n tokens and the first k
words of a prompt are its first k tokens. A seeded random text of `WINDOW` such words is cut
once; a prompt is a window of it (one string slice), starting where the request's key hashes
to, so unrelated prompts share no leading block. The words are the shortest ones (fewer bytes
per token); JSON never needs to escape them.

Mooncake blocks (`block`): each hash id is one block of `block_size` tokens, its first word
a lead chosen so that blocks following the same earlier block all start differently, its
rest a window keyed by the hash id. Requests sharing k leading hash ids then share exactly
k blocks of tokens, and not one token more (while a prefix has at most as many distinct
next blocks as there are lead words; past that, `shared_leads` counts the blocks whose lead
repeats a sibling's).
"""

from __future__ import annotations

import functools
import re
from array import array

import numpy as np

from layergate.exporters import tokenizer
from layergate.exporters.errors import UsageError

WINDOW = 1 << 20  # words in the seeded text prompts are cut from
BODY_WORDS = 1024  # the shortest words make the text (3.6 bytes a token for SmolLM2)
MIN_WORDS = 256
_WORD = re.compile(r" [a-z]+")
_GOLDEN = 0x9E3779B97F4A7C15
_M = (1 << 64) - 1
ROOT = -1  # the parent of a prompt's first block


class SynthError(UsageError, ValueError):
    """The tokenizer cannot make exact-length prompts (too few stable one-token words)."""


def mix(seed: int, key: int) -> int:
    """splitmix64 of (seed, key): a well-spread 64-bit number, the same on every platform
    (plain integers: for one key this is far cheaper than numpy)."""
    z = (key + (seed % _M + 1) * _GOLDEN) & _M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M
    return z ^ (z >> 31)


def unit(seed: int, key: int) -> float:
    """A number in [0, 1) for (seed, key), e.g. to sample rows."""
    return (mix(seed, key) >> 11) / (1 << 53)


@functools.lru_cache(maxsize=4)
def one_token_words(path: str) -> tuple[str, ...]:
    """The vocabulary's ` word` tokens that encode back to themselves alone, shortest first."""
    tok = tokenizer.load(path)
    found = []
    for i in sorted(tok.get_vocab().values()):
        text = tok.decode([i])
        if _WORD.fullmatch(text):
            found.append((i, text))
    encoded = tok.encode_batch([w for _, w in found], add_special_tokens=False)
    words = [(len(w), i, w) for (i, w), e in zip(found, encoded, strict=True) if e.ids == [i]]
    return tuple(w for _, _, w in sorted(words))


@functools.lru_cache(maxsize=2)
def _cyclic_text(path: str, seed: int) -> tuple[str, array]:
    """The seeded text, twice over (a window may run past its end), and where each word
    ends in it."""
    body = one_token_words(path)[:BODY_WORDS]
    picks = np.random.default_rng(seed).integers(0, len(body), WINDOW)
    lengths = np.array([len(w) for w in body], dtype=np.int64)[picks]
    text = "".join(body[i] for i in picks)
    ends = np.zeros(2 * WINDOW + 1, dtype=np.int64)
    np.cumsum(np.concatenate([lengths, lengths]), out=ends[1:])
    return text + text, array("q", ends.tobytes())  # plain ints when indexed: fast slicing


class PromptSynth:
    def __init__(self, tokenizer_path: str, seed: int) -> None:
        words = one_token_words(tokenizer_path)
        if len(words) < MIN_WORDS:
            raise SynthError(f"{tokenizer_path}: only {len(words)} words of one token "
                             f"(' word') in its vocabulary; {MIN_WORDS} are needed to make "
                             "prompts of exact length")
        self.seed, self.path, self.leads = seed, tokenizer_path, words
        self._text, self._ends = _cyclic_text(tokenizer_path, seed)
        self._lead: dict[int, int] = {}
        self._children: dict[int, int] = {}
        self.shared_leads = 0
        self._check(tokenizer_path)

    def _check(self, path: str) -> None:
        """The words must stay one token each in running text: count a sample."""
        sample = self.window(0, 4096) + self.leads[-1] + self.window(7, 512)
        got = tokenizer.count(path, sample)
        if got != 4096 + 1 + 512:
            raise SynthError(f"{path}: {4096 + 513} words encode to {got} tokens; this "
                             "tokenizer merges across words, so prompts of exact length "
                             "cannot be made from it")

    def window(self, start: int, n: int) -> str:
        """n words of the cyclic text from word `start`."""
        if n <= WINDOW:  # nearly always: one slice
            return self._text[self._ends[start]:self._ends[start + n]]
        parts = []
        while n > 0:
            take = min(n, WINDOW)
            parts.append(self._text[self._ends[start]:self._ends[start + take]])
            n -= take
        return "".join(parts)

    def prompt(self, key: int, n: int) -> str:
        """n tokens keyed by `key` (e.g. the row's line): unrelated keys share no block."""
        return self.window(mix(self.seed, key) % WINDOW, n)

    def blocks(self, hash_ids: list[int], n: int, block_size: int) -> str:
        """n tokens made of the blocks of `hash_ids`, block_size tokens each (the last one
        cut to what n leaves)."""
        parts = []
        parent = ROOT
        for i, h in enumerate(hash_ids):
            take = min(block_size, n - i * block_size)
            if take <= 0:
                break
            parts.append(self.leads[self._lead_of(h, parent)])
            parts.append(self.window(mix(self.seed, h) % WINDOW, take - 1))
            parent = h
        return "".join(parts)

    def _lead_of(self, h: int, parent: int) -> int:
        lead = self._lead.get(h)
        if lead is None:
            k = self._children.get(parent, 0)
            self._children[parent] = k + 1
            if k >= len(self.leads):
                self.shared_leads += 1
            lead = self._lead[h] = k % len(self.leads)
        return lead
