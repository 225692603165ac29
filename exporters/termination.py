"""Termination accuracy: did the arm end where the oracle ended?

The oracle is the response recorded in the traffic (arm `recorded`) when the request has
one, else the baseline. With tolerance t tokens (MetricsConfig.termination_tolerance):

| oracle \\ arm | length                | stop                                              |
| ------------ | --------------------- | ------------------------------------------------- |
| length       | correct               | premature if tokens < oracle - t, else correct    |
| stop         | truncated             | premature if < oracle - t, overrun if > oracle + t |

Any finish_reason other than "length" counts as a natural stop. The four shares sum to 1.
"""

from __future__ import annotations

import numpy as np

from exporters.aligned import BASELINE, BASELINE2, CANDIDATE, RECORDED, Aligned, compared_arms
from exporters.bootstrap import SumTable
from exporters.config import MetricsConfig
from exporters.estimate import SumStat, estimate
from exporters.figures import Figure

KINDS = ("correct", "truncated", "premature", "overrun")
NAMES = {"correct": "termination_accuracy", "truncated": "termination_truncated",
         "premature": "termination_premature", "overrun": "termination_overrun"}


def _oracle(al: Aligned) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ok, length_stop, tokens, from_recording) of the oracle per request."""
    a = al.arms[BASELINE]
    rec = al.arms.get(RECORDED)
    if rec is None:
        return a.ok, a.length_stop, a.tokens, np.zeros(al.n, dtype=bool)
    use = rec.ok
    return (use | a.ok, np.where(use, rec.length_stop, a.length_stop),
            np.where(use, rec.tokens, a.tokens), use)


def classify(o_len: np.ndarray, o_tok: np.ndarray, x_len: np.ndarray, x_tok: np.ndarray,
             tolerance: int) -> dict[str, np.ndarray]:
    """Boolean masks per kind; exactly one is true on each row."""
    early = x_tok < o_tok - tolerance
    late = x_tok > o_tok + tolerance
    truncated = x_len & ~o_len
    premature = ~x_len & early
    overrun = ~x_len & ~o_len & late
    correct = ~(truncated | premature | overrun)
    return {"correct": correct, "truncated": truncated, "premature": premature,
            "overrun": overrun}


def columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    if BASELINE not in al.arms:
        return out
    o_ok, o_len, o_tok, _ = _oracle(al)
    for arm in compared_arms(al):
        x = al.arms[arm]
        valid = o_ok & x.ok
        kinds = classify(o_len, o_tok, x.length_stop, x.tokens, config.termination_tolerance)
        out[f"term.{arm}.n"] = valid.astype(float)
        out |= {f"term.{arm}.{k}": (valid & m).astype(float) for k, m in kinds.items()}
    return out


def figures(table: SumTable, al: Aligned, config: MetricsConfig) -> list[Figure]:
    arms = compared_arms(al)
    if not arms:
        return []
    from_recording = int(_oracle(al)[3].sum())
    out: list[Figure] = []
    for arm in arms:
        for kind in KINDS:
            def stat(a: str, k: str = kind) -> SumStat:
                return SumStat(lambda c, n: c / n, (f"term.{a}.{k}", f"term.{a}.n"),
                               f"term.{a}.n", "no request succeeded on the arm and the oracle")
            noise = stat(BASELINE2) if arm == CANDIDATE and BASELINE2 in arms else None
            out += estimate(table, stat(arm), al.scenario_names, config, NAMES[kind], arm,
                            noise=noise,
                            detail=lambda s: {"oracle_recorded": from_recording,
                                              "tolerance_tokens": config.termination_tolerance})
    return out
