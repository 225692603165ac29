"""The threshold sweep for `dynamic` and the draft sweep for `speculative`.

Dynamic: candidate skip sets are the k least influential layers. Whether a skip set keeps a
prompt's whole greedy output is one teacher-forced pass (see `reference`), so every cell of
the grid (feature, operator, quantile threshold) x k is computed from one pass per (prompt, k):
a cell's rule fires on a prompt or not; where it fires, the output matches iff that k matched.

Speculative: per draft (skip set or early exit, full or cut head), the agreement of the
draft's argmax with the reference at each output position (teacher-forced, so the draft sees
its own KV for the context: a slightly pessimistic acceptance) drives an exact replay of the
accept-longest-prefix loop for each γ; its cost uses per-pass times measured on this machine.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from layergate.reference_engine.calibration.reference import Reference, agreement, teacher_forced
from layergate.reference_engine.runner import ModelRunner
from layergate.reference_engine.skip_policies.decider import mask_without
from layergate.reference_engine.skip_policies.detector import FEATURES, Features
from layergate.reference_engine.skip_policies.speculative import CutHead

QUANTILES = (0.25, 0.5, 0.75)


@dataclass(frozen=True)
class SweepCell:
    feature: str  # "always" for the unconditional rule
    op: str
    quantile: float
    threshold: float
    k: int  # layers skipped when the rule fires
    skip_rate: float
    mean_layers_skipped: float
    consistency: float  # exact-match share of whole greedy outputs against full


@dataclass(frozen=True)
class Draft:
    skip: tuple[int, ...] = ()
    exit_after: int | None = None
    head_tokens: int | None = None

    @property
    def label(self) -> str:
        depth = f"exit{self.exit_after}" if self.exit_after is not None else f"skip{len(self.skip)}"
        return depth + (f"-head{self.head_tokens}" if self.head_tokens else "")


@dataclass(frozen=True)
class SpecCell:
    draft: str
    skip: str  # layer indices, space-separated
    exit_after: int | None
    head_tokens: int | None
    gamma: int
    drafted: int
    accepted: int
    acceptance: float
    tokens_per_full_pass: float
    draft_step_s: float
    verify_step_s: float
    full_step_s: float
    speedup_vs_full: float  # decode-time ratio full / speculative, > 1 beats full


def match_by_k(runner: ModelRunner, refs: Sequence[Reference], ranking: Sequence[int],
               ks: Sequence[int], tick: Callable[[], None] = lambda: None
               ) -> dict[int, list[bool]]:
    """For each k: per prompt, does skipping the k least influential layers keep the whole
    greedy output?"""
    n = runner.num_layers
    out: dict[int, list[bool]] = {}
    for k in ks:
        mask = mask_without(ranking[:k], n)
        row = []
        for ref in refs:
            logits, _ = teacher_forced(runner, ref, mask)
            row.append(all(agreement(logits, ref)))
            tick()
        out[k] = row
    return out


def dynamic_grid(features: Sequence[Features], matches: dict[int, list[bool]]) -> list[SweepCell]:
    cells = []
    count = len(features)
    conditions = [("always", "", 1.0, float("nan"), [True] * count)]
    for name in FEATURES:
        values = [getattr(f, name) for f in features]
        for q in QUANTILES:
            threshold = _quantile(values, q)
            conditions.append((name, "<=", q, threshold, [v <= threshold for v in values]))
            threshold = _quantile(values, 1 - q)
            conditions.append((name, ">=", q, threshold, [v >= threshold for v in values]))
    for name, op, q, threshold, fires in conditions:
        rate = sum(fires) / count
        for k, ok in matches.items():
            consistent = sum(1 for f, m in zip(fires, ok, strict=True) if m or not f) / count
            cells.append(SweepCell(name, op, q, threshold, k, rate, k * rate, consistent))
    return cells


def _quantile(values: Sequence[float], q: float) -> float:
    """A quantile that is one of the values (so `<=` at q fires on about q of the prompts)."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))])


def draft_agreements(runner: ModelRunner, refs: Sequence[Reference], draft: Draft,
                     heads: Sequence[int | None], tick: Callable[[], None] = lambda: None
                     ) -> dict[int | None, list[list[bool]]]:
    """Per head size: per prompt, per output position, does the draft's argmax agree?"""
    mask = mask_without(draft.skip, runner.num_layers)
    out: dict[int | None, list[list[bool]]] = {h: [] for h in heads}
    for ref in refs:
        logits, _ = teacher_forced(runner, ref, mask, exit_after=draft.exit_after)
        for h in heads:
            out[h].append(agreement(logits, ref, h))
        tick()
    return out


@dataclass(frozen=True)
class Replay:
    drafted: int
    accepted: int
    rounds: int  # verification passes
    plain_steps: int  # full-depth single-token steps (where no draft fits)


def replay(agree: Sequence[bool], gamma: int) -> Replay:
    """The speculative loop over one output: token 0 comes from prefill; each round drafts
    min(γ, left - 1) tokens and keeps the agreeing prefix plus the verifier's token."""
    n = len(agree)
    pos, drafted, accepted, rounds, plain = 1, 0, 0, 0, 0
    while pos < n:
        g = min(gamma, n - pos - 1)
        if g < 1:
            plain += 1
            pos += 1
            continue
        acc = 0
        while acc < g and agree[pos + acc]:
            acc += 1
        drafted, accepted, rounds = drafted + g, accepted + acc, rounds + 1
        pos += acc + 1
    return Replay(drafted, accepted, rounds, plain)


@dataclass(frozen=True)
class StepTimes:
    full_s: float
    verify_s: dict[int, float]  # positions verified at once -> seconds
    draft_s: dict[str, float]  # draft label -> seconds of one draft step


@torch.inference_mode()
def measure_times(runner: ModelRunner, ref: Reference, drafts: Sequence[Draft],
                  widths: Sequence[int], repeats: int = 9,
                  tick: Callable[[], None] = lambda: None) -> StepTimes:
    """Seconds of one forward per kind of pass at the end of ref's context: full depth at
    width 1 and at each verification width, and one step of each draft. Passes are
    interleaved round-robin and the minimum of `repeats` kept, so every candidate sees the
    same machine and a busy neighbour's burst does not decide the ranking."""
    n = runner.num_layers
    cache = runner.new_cache()
    runner.forward([list(ref.sequence)], [cache], (True,) * n)
    start = cache.length
    token = ref.output_ids[-1]
    passes: dict[tuple[str, int], Callable[[], None]] = {}
    for w in sorted({1, *widths}):
        passes[("full", w)] = _pass(runner, cache, [token] * w, None)
    for d in drafts:
        passes[(d.label, 1)] = _pass(runner, cache, [token], d)
    best = dict.fromkeys(passes, float("inf"))
    for _ in range(repeats):
        for key, run in passes.items():
            cache.truncate(start)
            t0 = time.perf_counter()
            run()
            best[key] = min(best[key], time.perf_counter() - t0)
        tick()
    return StepTimes(best[("full", 1)], {w: best[("full", w)] for w in widths},
                     {d.label: best[(d.label, 1)] for d in drafts})


def _pass(runner: ModelRunner, cache, tokens: list[int], draft: Draft | None):
    """One forward as the policy runs it (a draft uses its own, possibly cut, head)."""
    n = runner.num_layers
    mask = (True,) * n if draft is None else mask_without(draft.skip, n)
    exit_after = None if draft is None else draft.exit_after
    if draft is not None and draft.head_tokens:
        runner = _with_head(runner, draft.head_tokens)
    logits_for = "all" if len(tokens) > 1 else "last"
    return lambda: runner.forward([tokens], [cache], mask, exit_after=exit_after,
                                  logits_for=logits_for)


def _with_head(runner: ModelRunner, rows: int) -> ModelRunner:
    cut = ModelRunner(runner.model)
    cut.lm_head = CutHead(runner.lm_head, rows)
    return cut


def spec_cells(draft: Draft, agreements: Sequence[Sequence[bool]], gammas: Sequence[int],
               times: StepTimes) -> list[SpecCell]:
    out = []
    draft_s = times.draft_s[draft.label]
    outputs = sum(len(a) - 1 for a in agreements)  # tokens the decode loop produces
    full_cost = outputs * times.full_s
    for g in gammas:
        runs = [replay(a, g) for a in agreements]
        drafted = sum(r.drafted for r in runs)
        accepted = sum(r.accepted for r in runs)
        rounds = sum(r.rounds for r in runs)
        plain = sum(r.plain_steps for r in runs)
        # a round drafted min(γ, ...) tokens: charge drafts one by one and verify at width γ+1
        cost = drafted * draft_s + rounds * times.verify_s[g + 1] + plain * times.full_s
        out.append(SpecCell(
            draft.label, " ".join(map(str, draft.skip)), draft.exit_after, draft.head_tokens,
            g, drafted, accepted, accepted / drafted if drafted else 0.0,
            outputs / (rounds + plain) if rounds + plain else 0.0, draft_s,
            times.verify_s[g + 1], times.full_s, full_cost / cost if cost else 0.0))
    return out


def write_csv(rows: Sequence, path: Path) -> Path:
    if not rows:
        raise ValueError(f"nothing to write to {path}")
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=[f.name for f in fields(rows[0])])
        writer.writeheader()
        for row in rows:
            writer.writerow(asdict(row))
    return path
