"""`speculative`: lossless self-speculative decoding.

Each step drafts up to γ tokens with a reduced-depth pass of the same model (a calibrated skip
set, or early exit after layer E, through the final norm and an LM head that may be cut to
the first `head_tokens` vocabulary rows), then verifies them in ONE full-depth forward over
the γ + 1 positions. Greedy: the longest prefix of drafts that matches the full model's argmax
is kept, plus the full model's own next token, so the output is token-identical to `full`.
Sampling: the speculative-sampling rule (accept d with probability min(1, p(d) / q(d)), else
resample from max(0, p - q)), so the output distribution is the full model's.

Rejected positions are rolled back with `cache.truncate`; the KV that stays was written by
the full-depth verification pass. Layers executed per output token count the sequential
layer passes of the step (γ draft passes + one verification pass) spread over the tokens it
produced; `computed_tokens` counts every drafted and verified position.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from layergate.reference_engine.api import SamplingParams
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.runner import ModelRunner
from layergate.reference_engine.sampling import nucleus
from layergate.reference_engine.sequence import SequenceState
from layergate.reference_engine.skip_policies.base import SkipPolicy, StepResult
from layergate.reference_engine.skip_policies.decider import mask_without
from layergate.reference_engine.skip_policies.registry import register
from layergate.reference_engine.skip_policies.rules import SpeculativeDraft, calibrated_rules

OPTIONS = ("gamma", "exit_after", "head_tokens")


class CutHead(torch.nn.Module):
    """The LM head restricted to its first `rows` vocabulary entries (a view, no copy)."""

    def __init__(self, head: torch.nn.Module, rows: int) -> None:
        super().__init__()
        self.weight = head.weight[:rows]
        bias = getattr(head, "bias", None)
        self.bias = None if bias is None else bias[:rows]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(h, self.weight, self.bias)


def draft_from(config: EngineConfig, num_layers: int) -> SpeculativeDraft:
    """The draft: `--skip-layers` / skip-policy options over the rules file's calibrated one."""
    opts = config.skip_policy_settings
    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown speculative option(s) {unknown}; known: {', '.join(OPTIONS)}")
    if config.skip_layers or "exit_after" in opts:
        base = SpeculativeDraft(skip=tuple(config.skip_layers))
    else:
        base = calibrated_rules(config.rules, config.model, num_layers).speculative
    draft = SpeculativeDraft(
        skip=base.skip,
        exit_after=_int(opts, "exit_after", base.exit_after, 0, num_layers - 1),
        head_tokens=_int(opts, "head_tokens", base.head_tokens, 1, None),
        gamma=_int(opts, "gamma", base.gamma, 1, 16))
    mask_without(draft.skip, num_layers)  # validates the indices
    if not draft.skip and draft.exit_after is None:
        raise ValueError("speculative needs a reduced-depth draft: skip layers or exit_after")
    return draft


def _int(opts: dict[str, Any], key: str, default: int | None, low: int,
         high: int | None) -> int | None:
    if key not in opts:
        return default
    try:
        value = int(opts[key])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"speculative option {key}={opts[key]!r} is not an integer") from exc
    if value < low or (high is not None and value > high):
        raise ValueError(f"speculative option {key}={value} out of range {low}..{high or ''}")
    return value


@register("speculative")
class SpeculativeSkipPolicy(SkipPolicy):
    custom_decode = True

    def __init__(self, config: EngineConfig, num_layers: int) -> None:
        super().__init__(config, num_layers)
        self.draft = draft_from(config, num_layers)
        self.draft_mask = mask_without(self.draft.skip, num_layers)
        exit_after = self.draft.exit_after
        self.draft_layers = sum(m for i, m in enumerate(self.draft_mask)
                                if exit_after is None or i <= exit_after)
        self._draft_runner: ModelRunner | None = None
        self._eos: set[int] = set()

    def draft_runner(self, runner: ModelRunner) -> ModelRunner:
        """The same layers and KV, with the (optionally cut) draft head."""
        if self._draft_runner is None or self._draft_runner.model is not runner.model:
            draft = ModelRunner(runner.model)
            if self.draft.head_tokens is not None and self.draft.head_tokens < runner.vocab_size:
                draft.lm_head = CutHead(runner.lm_head, self.draft.head_tokens)
            self._draft_runner = draft
            self._eos = eos_ids(runner.model)
        return self._draft_runner

    def decode(self, runner: ModelRunner, seq: SequenceState, max_new: int) -> StepResult:
        gamma = min(self.draft.gamma, max_new - 1)
        if gamma < 1 or seq.plan.dry_run:
            return super().decode(runner, seq, max_new)
        params = seq.request.params
        start = seq.cache.length
        drafts, draft_probs = self._draft(runner, seq, gamma, params)
        seq.cache.truncate(start)
        out = runner.forward([[seq.last_token, *drafts]], [seq.cache], seq.mask,
                             logits_for="all")
        logits = out.logits[0]
        if params.greedy:
            accepted, last = _accept_greedy(drafts, logits)
        else:
            accepted, last = _accept_sampled(drafts, draft_probs, logits, params,
                                             seq.sampler.generator)
        tokens = [*drafts[:accepted], last]
        seq.cache.truncate(start + len(tokens))
        sampled = tuple(seq.sampler.describe(logits[j], t) for j, t in enumerate(tokens))
        total = len(drafts) * self.draft_layers + out.layers_executed
        return StepResult(sampled, _spread(total, len(tokens)),
                          computed_tokens=len(drafts) + out.computed_tokens,
                          draft_proposed=len(drafts), draft_accepted=accepted)

    def _draft(self, runner: ModelRunner, seq: SequenceState, gamma: int,
               params: SamplingParams) -> tuple[list[int], list[torch.Tensor]]:
        draft_runner = self.draft_runner(runner)
        token, drafts, probs = seq.last_token, [], []
        for _ in range(gamma):
            out = draft_runner.forward([[token]], [seq.cache], self.draft_mask,
                                       exit_after=self.draft.exit_after)
            row = out.logits[0]
            if params.greedy:
                token = int(torch.argmax(row))
            else:
                q = _probs(row, params, runner.vocab_size)
                token = int(torch.multinomial(q, 1, generator=seq.sampler.generator))
                probs.append(q)
            drafts.append(token)
            if token in self._eos:  # nothing after an end of sequence is worth drafting
                break
        return drafts, probs


def _accept_greedy(drafts: Sequence[int], logits: torch.Tensor) -> tuple[int, int]:
    """Longest agreeing prefix; the full model's token after it."""
    target = torch.argmax(logits, dim=-1).tolist()
    n = 0
    while n < len(drafts) and drafts[n] == target[n]:
        n += 1
    return n, target[n]


def _accept_sampled(drafts: Sequence[int], draft_probs: Sequence[torch.Tensor],
                    logits: torch.Tensor, params: SamplingParams,
                    generator: torch.Generator) -> tuple[int, int]:
    """Speculative sampling (Leviathan et al. 2023; Chen et al. 2023)."""
    vocab = logits.shape[-1]
    for j, (d, q) in enumerate(zip(drafts, draft_probs, strict=True)):
        p = _probs(logits[j], params, vocab)
        ratio = float(p[d]) / max(float(q[d]), 1e-30)
        if float(torch.rand((), generator=generator)) < min(1.0, ratio):
            continue
        residual = torch.clamp(p - q, min=0.0)
        total = float(residual.sum())
        dist = residual / total if total > 0 else p
        return j, int(torch.multinomial(dist, 1, generator=generator))
    p = _probs(logits[len(drafts)], params, vocab)
    return len(drafts), int(torch.multinomial(p, 1, generator=generator))


def _probs(row: torch.Tensor, params: SamplingParams, vocab: int) -> torch.Tensor:
    """The sampler's distribution (temperature, then top-p) over the full vocabulary; a cut
    draft head puts zero mass on the rows it does not have."""
    probs = torch.softmax(row.float().cpu() / params.temperature, dim=-1)
    if params.top_p < 1.0:
        probs = nucleus(probs, params.top_p)
    if probs.shape[-1] < vocab:
        probs = torch.nn.functional.pad(probs, (0, vocab - probs.shape[-1]))
    return probs


def _spread(total: int, n: int) -> tuple[int, ...]:
    """`total` layer passes over n tokens, as integers that sum to `total`."""
    base, extra = divmod(total, n)
    return tuple(base + (1 if i < extra else 0) for i in range(n))


def eos_ids(model: Any) -> set[int]:
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if ids is None:
        ids = getattr(model.config, "eos_token_id", None)
    if ids is None:
        return set()
    return {int(i) for i in ids} if isinstance(ids, list | tuple) else {int(ids)}
