"""Termination accuracy: did the arm end where the oracle ended?

The oracle is always the baseline the arm ran beside. With tolerance t tokens
(MetricsConfig.termination_tolerance):

| oracle \\ arm | length                | stop                                              |
| ------------ | --------------------- | ------------------------------------------------- |
| length       | correct               | premature if tokens < oracle - t, else correct    |
| stop         | truncated             | premature if < oracle - t, overrun if > oracle + t |

Any finish_reason other than "length" counts as a natural stop. The four shares sum to 1.

`termination_accuracy_recorded` is the share ending correctly against the response recorded
in the traffic (arm `recorded`) instead, per arm (baseline included) over the requests that
have one; it is kept apart because a recording from another server or made by hand is not
something even the baseline reproduces. The candidate's noise floor is the baseline's value.
"""

from __future__ import annotations

import numpy as np

from layergate.exporters.catalogue import (
    BASELINE,
    BASELINE2,
    CANDIDATE,
    RECORDED,
    TERMINATION_ACCURACY,
    TERMINATION_ACCURACY_RECORDED,
    TERMINATION_OVERRUN,
    TERMINATION_PREMATURE,
    TERMINATION_TRUNCATED,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.aligned import Aligned, compared_arms, lacking
from layergate.exporters.figures.bootstrap import SumTable
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate

KINDS = ("correct", "truncated", "premature", "overrun")
NAMES = {"correct": TERMINATION_ACCURACY, "truncated": TERMINATION_TRUNCATED,
         "premature": TERMINATION_PREMATURE, "overrun": TERMINATION_OVERRUN}


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


def recorded_arms(al: Aligned) -> tuple[str, ...]:
    """Arms judged against the recording: none without one, else every arm that ran."""
    if RECORDED not in al.arms:
        return ()
    return tuple(a for a in (BASELINE, CANDIDATE, BASELINE2) if a in al.arms)


def columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    return _baseline_columns(al, config) | _recorded_columns(al, config)


def _baseline_columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for arm in compared_arms(al):
        a, x = al.arms[BASELINE], al.arms[arm]
        # a tolerance in tokens needs token counts on both sides (NaN: counted in characters)
        valid = a.ok & x.ok & np.isfinite(a.tokens) & np.isfinite(x.tokens)
        kinds = classify(a.length_stop, a.tokens, x.length_stop, x.tokens,
                         config.termination_tolerance)
        out[f"term.{arm}.n"] = valid.astype(float)
        out |= {f"term.{arm}.{k}": (valid & m).astype(float) for k, m in kinds.items()}
    return out


def _recorded_columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    arms = recorded_arms(al)
    if not arms:
        return {}
    rec = al.arms[RECORDED]
    out = {"termrec.recorded": rec.ok.astype(float)}
    for arm in arms:
        x = al.arms[arm]
        valid = rec.ok & x.ok & np.isfinite(rec.tokens) & np.isfinite(x.tokens)
        correct = classify(rec.length_stop, rec.tokens, x.length_stop, x.tokens,
                           config.termination_tolerance)["correct"]
        out[f"termrec.{arm}.n"] = valid.astype(float)
        out[f"termrec.{arm}.correct"] = (valid & correct).astype(float)
    return out


def _share(prefix: str, arm: str, kind: str, undefined: str) -> SumStat:
    return SumStat(lambda c, n: c / n, (f"{prefix}.{arm}.{kind}", f"{prefix}.{arm}.n"),
                   f"{prefix}.{arm}.n", undefined)


def figures(table: SumTable, al: Aligned, config: MetricsConfig) -> list[Figure]:
    arms = compared_arms(al)
    detail = {"oracle": BASELINE, "tolerance_tokens": config.termination_tolerance}
    out: list[Figure] = []
    for arm in arms:
        for kind in KINDS:
            def stat(a: str, k: str = kind) -> SumStat:
                return _share("term", a, k, lacking(
                    al, (BASELINE, a), "tokens", "no request succeeded on the arm and the "
                    "baseline"))
            noise = stat(BASELINE2) if arm == CANDIDATE and BASELINE2 in arms else None
            out += estimate(table, stat(arm), al.scenario_names, config, NAMES[kind], arm,
                            noise=noise, detail=lambda s: dict(detail))
    return out + _recorded_figures(table, al, config)


def _recorded_figures(table: SumTable, al: Aligned, config: MetricsConfig) -> list[Figure]:
    arms = recorded_arms(al)

    def stat(a: str) -> SumStat:
        return _share("termrec", a, "correct", lacking(
            al, (a,), "tokens", "no request with a recorded response succeeded on the arm"))

    def detail(stratum: int | None) -> dict[str, int]:
        return {"recorded_requests": int(round(table.sums("termrec.recorded", stratum)[0])),
                "tolerance_tokens": config.termination_tolerance}

    out: list[Figure] = []
    for arm in arms:
        # the baseline's own agreement with the recording is what the candidate's is read against
        noise = stat(BASELINE) if arm == CANDIDATE and BASELINE in arms else None
        out += estimate(table, stat(arm), al.scenario_names, config,
                        TERMINATION_ACCURACY_RECORDED, arm, noise=noise, detail=detail)
    return out
