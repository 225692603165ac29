"""Full-depth references for calibration, and teacher-forced passes under other masks.

`generate` decodes greedily at full depth (what `full` serves) and times every layer and the
head during the decode steps. `teacher_forced` feeds prompt + reference output in one pass
under a mask: its argmax at each output position is what that mask would have produced given
the reference prefix, so a mask reproduces the whole greedy output exactly iff every argmax
agrees (one forward instead of a generation per sweep cell).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from layergate.reference_engine.calibration.prompts import CalibrationPrompt
from layergate.reference_engine.runner import ModelRunner


@dataclass(frozen=True)
class Reference:
    prompt: CalibrationPrompt
    output_ids: tuple[int, ...]

    @property
    def sequence(self) -> tuple[int, ...]:
        """The tokens fed by a teacher-forced pass (the last output token is never fed)."""
        return self.prompt.prompt_ids + self.output_ids[:-1]


class LayerTimer:
    """Wall time per decoder layer, and of norm + head, while `active`."""

    def __init__(self, runner: ModelRunner) -> None:
        n = runner.num_layers
        self.layer_s = [0.0] * n
        self.head_s = 0.0
        self.active = False
        self._t0: dict[int, float] = {}
        self._handles = []
        modules = [*runner.layers, runner.norm, runner.lm_head]
        for i, module in enumerate(modules):
            self._handles.append(module.register_forward_pre_hook(self._start(i)))
            self._handles.append(module.register_forward_hook(self._stop(i, n)))

    def _start(self, i: int):
        def hook(module, args):
            if self.active:
                self._t0[i] = time.perf_counter()
        return hook

    def _stop(self, i: int, n: int):
        def hook(module, args, out):
            if self.active and i in self._t0:
                elapsed = time.perf_counter() - self._t0.pop(i)
                if i < n:
                    self.layer_s[i] += elapsed
                else:
                    self.head_s += elapsed
        return hook

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def generate(runner: ModelRunner, prompt: CalibrationPrompt, eos: set[int],
             timer: LayerTimer | None = None) -> Reference:
    """Greedy full-depth decode until an end-of-sequence token or max_tokens."""
    mask = (True,) * runner.num_layers
    cache = runner.new_cache()
    out = runner.forward([list(prompt.prompt_ids)], [cache], mask)
    tokens = [int(torch.argmax(out.logits[0]))]
    if timer:
        timer.active = True
    try:
        while tokens[-1] not in eos and len(tokens) < prompt.max_tokens:
            out = runner.forward([[tokens[-1]]], [cache], mask)
            tokens.append(int(torch.argmax(out.logits[0])))
    finally:
        if timer:
            timer.active = False
    return Reference(prompt, tuple(tokens))


def teacher_forced(runner: ModelRunner, ref: Reference, mask: Sequence[bool], *,
                   exit_after: int | None = None, return_hidden: bool = False):
    """One pass over prompt + output under `mask`; returns (logits at the positions that
    predict each output token [n_out, vocab], the runner's ForwardOutput)."""
    cache = runner.new_cache()
    out = runner.forward([list(ref.sequence)], [cache], mask, logits_for="all",
                         exit_after=exit_after, return_hidden=return_hidden)
    first = len(ref.prompt.prompt_ids) - 1
    return out.logits[0, first:first + len(ref.output_ids)], out


def agreement(logits: torch.Tensor, ref: Reference, head_tokens: int | None = None) -> list[bool]:
    """Per output position: does the argmax (over the first head_tokens rows) match?"""
    rows = logits if head_tokens is None else logits[:, :head_tokens]
    target = torch.tensor(ref.output_ids)
    return (torch.argmax(rows, dim=-1) == target).tolist()
