"""A conversation turn by turn: how long each arm's conversations stayed the baseline's,
and what each turn cost, with the conversation as the bootstrap's unit (one row per
conversation here, so a resample draws whole conversations, stratified by scenario).

Per conversation and arm X, walking its turns k = 1, 2, ... against the baseline A: turn k
*differs* when one arm answered and the other did not (its conversation had ended), or both
answered and their answers differ ("the same output" of the answer: text, refusal, tool
calls); an error row of either arm *cuts* the conversation at k. The first turn that differs,
before any cut, is its divergence turn d; a cut before it censors the conversation from the
cut on (it is neither identical nor diverged there, and left out).

agreement_at_turn[k]          among conversations with at least k turns, observed at k (not
                              censored, or diverged before the cut): share with d > k
conversation_divergence_turn  mean d over conversations not censored before d, d = turns + 1
                              for one identical throughout (a restricted mean: higher is
                              better)
ttft_at_turn[k]               per arm: mean TTFT of its ok answers at turn k
prompt_tokens_at_turn[k]      per arm: mean prompt tokens it reported at turn k
accuracy_at_turn[k]           per arm, where references exist: share right at turn k

The candidate's agreement figures carry A' against A as their noise floor, from the same
resamples. Computed only when the run's traffic holds multi-turn conversations, in either
conversation mode: `recorded` (each turn on the recorded history) beside `own` (each arm on
its own) shows how much the errors compound.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from layergate.exporters.catalogue import (
    ACCURACY_AT_TURN,
    AGREEMENT_AT_TURN,
    BASELINE,
    BASELINE2,
    CANDIDATE,
    CONVERSATION_DIVERGENCE_TURN,
    PROMPT_TOKENS_AT_TURN,
    TTFT_AT_TURN,
    per_turn,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.aligned import Aligned, compared_arms
from layergate.exporters.figures.bootstrap import resample_sums
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate

MAX_TURNS = 50  # per-turn figures up to this turn (a longer conversation counts in the rest)
NONE, OK, ERROR = 0, 1, 2  # an arm's state at a turn: no row (its conversation ended), ...


class Turns:
    """The run's conversations as a (conversation, turn) grid per arm."""

    def __init__(self, al: Aligned, positions: Mapping[str, tuple[str, int]]) -> None:
        row_of = {rid: i for i, rid in enumerate(al.request_ids)}
        cells: dict[str, dict[int, int]] = {}  # conversation -> turn -> aligned row
        for rid, (key, turn) in positions.items():
            if rid in row_of:
                cells.setdefault(key, {})[turn] = row_of[rid]
        keys = sorted(cells, key=lambda k: (int(al.strata[cells[k][min(cells[k])]]), k))
        self.keys = keys
        self.turns = np.array([max(cells[k]) for k in keys], dtype=int)
        width = min(int(self.turns.max(initial=0)), MAX_TURNS)
        self.width = width
        self.rows = np.full((len(keys), width), -1, dtype=np.int64)
        for c, key in enumerate(keys):
            for turn, row in cells[key].items():
                if turn <= width:
                    self.rows[c, turn - 1] = row
        self.strata = np.array([al.strata[cells[k][min(cells[k])]] for k in keys], dtype=int)

    def take(self, values: np.ndarray, fill: float | int) -> np.ndarray:
        out = np.where(self.rows >= 0, values[np.maximum(self.rows, 0)], fill)
        return out

    def state(self, al: Aligned, arm: str) -> np.ndarray:
        x = al.arms[arm]
        per_row = np.where(x.ok, OK, np.where(x.present, ERROR, NONE))
        return self.take(per_row, NONE).astype(int)


def _walk(turns: Turns, al: Aligned, arm: str) -> tuple[np.ndarray, np.ndarray]:
    """(first divergence turn, 1-based: inf when none; censoring turn: inf when not cut
    before diverging) per conversation, of `arm` against the baseline."""
    sa, sx = turns.state(al, BASELINE), turns.state(al, arm)
    ka = turns.take(al.arms[BASELINE].text_key, 0)
    kx = turns.take(al.arms[arm].text_key, 0)
    cut = (sa == ERROR) | (sx == ERROR)
    differs = ~cut & ((sa != sx) | ((sa == OK) & (ka != kx)))
    n = len(turns.keys)
    first_cut = np.where(cut.any(axis=1), cut.argmax(axis=1) + 1, np.inf) if n else np.zeros(0)
    first_diff = np.where(differs.any(axis=1), differs.argmax(axis=1) + 1, np.inf) \
        if n else np.zeros(0)
    diverged = np.where(first_diff < first_cut, first_diff, np.inf)
    censored = np.where(first_cut <= first_diff, first_cut, np.inf)
    return diverged, censored


def columns(al: Aligned, turns: Turns, right: Mapping[str, np.ndarray] | None,
            scored: Mapping[str, np.ndarray] | None) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    ks = np.arange(1, turns.width + 1)
    reached = turns.turns[:, None] >= ks[None, :]
    for arm in compared_arms(al):
        diverged, censored = _walk(turns, al, arm)
        observed = reached & ((diverged[:, None] <= ks) | (censored[:, None] > ks))
        same = observed & (diverged[:, None] > ks)
        for k in ks:
            out[f"turn.{arm}.risk.{k}"] = observed[:, k - 1].astype(float)
            out[f"turn.{arm}.same.{k}"] = same[:, k - 1].astype(float)
        counted = np.isfinite(diverged) | ~np.isfinite(censored)
        out[f"turn.{arm}.div_n"] = counted.astype(float)
        out[f"turn.{arm}.div"] = np.where(counted, np.where(np.isfinite(diverged), diverged,
                                                             turns.turns + 1), 0.0)
    for arm in (BASELINE, *compared_arms(al)):
        x = al.arms[arm]
        ok = turns.take(x.ok, False).astype(bool)
        ttft = turns.take(np.nan_to_num(x.ttft, nan=0.0), 0.0)
        has_ttft = ok & turns.take(np.isfinite(x.ttft), False).astype(bool)
        prompt = turns.take(np.nan_to_num(x.prompt_tokens, nan=0.0), 0.0)
        has_prompt = ok & turns.take(np.isfinite(x.prompt_tokens), False).astype(bool)
        for k in ks:
            out[f"turn.{arm}.ttft_n.{k}"] = has_ttft[:, k - 1].astype(float)
            out[f"turn.{arm}.ttft.{k}"] = np.where(has_ttft[:, k - 1], ttft[:, k - 1], 0.0)
            out[f"turn.{arm}.prompt_n.{k}"] = has_prompt[:, k - 1].astype(float)
            out[f"turn.{arm}.prompt.{k}"] = np.where(has_prompt[:, k - 1], prompt[:, k - 1],
                                                     0.0)
        if right is not None and scored is not None and arm in right:
            r = turns.take(right[arm], False).astype(float)
            s = turns.take(scored[arm], False).astype(float)
            for k in ks:
                out[f"turn.{arm}.right.{k}"] = r[:, k - 1]
                out[f"turn.{arm}.scored.{k}"] = s[:, k - 1]
    return out


def _share(hit: str, n: str, undefined: str) -> SumStat:
    return SumStat(lambda h, c: h / c, (hit, n), n, undefined)


def figures(al: Aligned, positions: Mapping[str, tuple[str, int]] | None,
            config: MetricsConfig, right: Mapping[str, np.ndarray] | None = None,
            scored: Mapping[str, np.ndarray] | None = None) -> list[Figure]:
    """The turn figures of a run whose traffic holds multi-turn conversations (`positions`:
    request id -> (conversation, turn), exporters/figures/conversations.turn_positions);
    `right` / `scored` (arm -> bool per aligned row): accuracy's judgement, when the run
    has references."""
    if not positions or BASELINE not in al.arms:
        return []
    turns = Turns(al, positions)
    if not turns.keys or turns.width < 2:
        return []
    cols = columns(al, turns, right, scored)
    table = resample_sums(cols, turns.strata, len(al.scenario_names), config.n_resamples,
                          config.seed)
    arms = compared_arms(al)
    has_floor = BASELINE2 in arms
    out: list[Figure] = []

    def est(stat: SumStat, name: str, arm: str, floor: SumStat | None = None,
            turn: int | None = None) -> list[Figure]:
        detail = (lambda s: {"turn": turn}) if turn is not None else None
        return estimate(table, stat, al.scenario_names, config, name, arm, noise=floor,
                        detail=detail)

    for k in range(1, turns.width + 1):
        name = per_turn(AGREEMENT_AT_TURN, k)
        for arm in arms:
            stat = _share(f"turn.{arm}.same.{k}", f"turn.{arm}.risk.{k}",
                          f"no conversation reached turn {k}")
            floor = _share(f"turn.{BASELINE2}.same.{k}", f"turn.{BASELINE2}.risk.{k}",
                           "") if has_floor and arm == CANDIDATE else None
            out += est(stat, name, arm, floor, k)
    for arm in arms:
        stat = SumStat(lambda d, n: d / n, (f"turn.{arm}.div", f"turn.{arm}.div_n"),
                       f"turn.{arm}.div_n", "every conversation was cut before it differed")
        floor = SumStat(lambda d, n: d / n, (f"turn.{BASELINE2}.div", f"turn.{BASELINE2}.div_n"),
                        f"turn.{BASELINE2}.div_n") if has_floor and arm == CANDIDATE else None
        out += est(stat, CONVERSATION_DIVERGENCE_TURN, arm, floor)
    for arm in (BASELINE, *arms):
        for k in range(1, turns.width + 1):
            out += est(SumStat(lambda t, n: t / n, (f"turn.{arm}.ttft.{k}",
                                                    f"turn.{arm}.ttft_n.{k}"),
                               f"turn.{arm}.ttft_n.{k}", f"no answer at turn {k}"),
                       per_turn(TTFT_AT_TURN, k), arm, turn=k)
            if table.sums(f"turn.{arm}.prompt_n.{k}")[0] > 0:
                out += est(SumStat(lambda t, n: t / n, (f"turn.{arm}.prompt.{k}",
                                                        f"turn.{arm}.prompt_n.{k}"),
                                   f"turn.{arm}.prompt_n.{k}", f"no usage at turn {k}"),
                           per_turn(PROMPT_TOKENS_AT_TURN, k), arm, turn=k)
            if f"turn.{arm}.scored.{k}" in cols and table.sums(f"turn.{arm}.scored.{k}")[0]:
                out += est(_share(f"turn.{arm}.right.{k}", f"turn.{arm}.scored.{k}",
                                  f"no scored answer at turn {k}"),
                           per_turn(ACCURACY_AT_TURN, k), arm, turn=k)
    return out
