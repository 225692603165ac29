"""Next-token choice for one request: greedy or temperature + top-p with a per-request generator.

The generator is seeded from the request's `seed` (or the engine seed), so the same seed gives
the same sample whatever else is in the batch. Logprobs are the log-softmax of the model's own
distribution (before temperature / top-p).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from layergate.reference_engine.api import SamplingParams


@dataclass(frozen=True)
class SampledToken:
    token_id: int
    logprob: float | None = None
    top_logprobs: tuple[tuple[int, float], ...] | None = None  # (token id, logprob), best first


class RequestSampler:
    """Chooses tokens for one request from float32 logits rows ([vocab])."""

    def __init__(self, params: SamplingParams, default_seed: int = 0) -> None:
        self.params = params
        seed = params.seed if params.seed is not None else default_seed
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)

    def choose(self, logits: torch.Tensor) -> int:
        """The next token id, without logprobs (used when verifying drafts too)."""
        p = self.params
        if p.greedy:
            return int(torch.argmax(logits))
        scaled = logits.float().cpu() / p.temperature
        probs = torch.softmax(scaled, dim=-1)
        if p.top_p < 1.0:
            probs = nucleus(probs, p.top_p)
        return int(torch.multinomial(probs, 1, generator=self.generator))

    def sample(self, logits: torch.Tensor) -> SampledToken:
        token = self.choose(logits)
        return self.describe(logits, token)

    def describe(self, logits: torch.Tensor, token: int) -> SampledToken:
        """Attach logprobs (when the request asked for them) to a chosen token."""
        p = self.params
        if not p.logprobs and p.top_logprobs == 0:
            return SampledToken(token)
        logp = torch.log_softmax(logits.float(), dim=-1)
        top = None
        if p.top_logprobs > 0:
            values, ids = torch.topk(logp, p.top_logprobs)
            top = tuple((int(i), float(v)) for i, v in zip(ids, values, strict=True))
        return SampledToken(token, float(logp[token]), top)


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus (top-p) filtering: keep the smallest set of most likely tokens whose mass
    reaches top_p."""
    sorted_p, order = torch.sort(probs, descending=True)
    cumulative = torch.cumsum(sorted_p, dim=-1)
    drop = cumulative - sorted_p >= top_p  # the token that crosses top_p stays
    drop[..., 0] = False  # the most likely token always stays, even if top_p underflows
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    out = torch.zeros_like(probs).scatter_(-1, order, sorted_p)
    return out / out.sum()


class StopChecker:
    """Incremental detokenization with stop sequences.

    `push(token)` returns the text delta safe to emit; `stopped` turns True when a stop
    sequence appeared (the text is cut before it). Text that might be the start of a stop
    sequence is held back until it is not. Only a short window of tokens is re-decoded per
    token (as vLLM does), so long outputs do not cost quadratic detokenization.
    """

    def __init__(self, tokenizer, stop: tuple[str, ...]) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.ids: list[int] = []
        self.text = ""  # decoded output so far
        self.emitted = 0  # characters of self.text already emitted
        self.stopped = False
        self._prefix = 0  # ids[_prefix:_read] decode to the tail of self.text
        self._read = 0

    def push(self, token_id: int) -> str:
        if self.stopped:
            return ""
        self.ids.append(token_id)
        decode = self.tokenizer.decode
        before = decode(self.ids[self._prefix:self._read], skip_special_tokens=True)
        after = decode(self.ids[self._prefix:], skip_special_tokens=True)
        if after.endswith("\ufffd") or len(after) <= len(before):
            return ""  # mid-codepoint (or nothing visible yet): wait for more tokens
        self.text += after[len(before):]
        self._prefix, self._read = self._read, len(self.ids)
        for s in self.stop:
            at = self.text.find(s, max(0, self.emitted - len(s) + 1))
            if at != -1:
                self.stopped = True
                self.text = self.text[:at]
                return self._flush(len(self.text))
        hold = max((_partial_suffix(self.text, s) for s in self.stop), default=0)
        return self._flush(len(self.text) - hold)

    def finish(self) -> str:
        """Everything not emitted yet (the request ended without a stop sequence)."""
        return self._flush(len(self.text))

    def _flush(self, upto: int) -> str:
        if upto <= self.emitted:
            return ""
        delta = self.text[self.emitted:upto]
        self.emitted = upto
        return delta


def _partial_suffix(text: str, stop: str) -> int:
    """Length of the longest suffix of text that is a proper prefix of stop."""
    for n in range(min(len(stop) - 1, len(text)), 0, -1):
        if text.endswith(stop[:n]):
            return n
    return 0
