"""Redundancy elimination rate: the share of time per output token the arm eliminated
against the baseline, over paired requests (docs/METRICS.md).

rer            = 1 - (sum E2E_X / sum tokens_X) / (sum E2E_A / sum tokens_A)
rer_decode     = the same from the decode phase only: (E2E - TTFT) over (tokens - 1)
rer_theoretical= token-weighted mean `theoretical_saving` the engine reported for arm X
rer_realisation= rer / rer_theoretical (not computable when nothing was skipped)
"""

from __future__ import annotations

import numpy as np

from layergate.exporters.catalogue import (
    BASELINE,
    BASELINE2,
    CANDIDATE,
    RER,
    RER_DECODE,
    RER_REALISATION,
    RER_THEORETICAL,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.aligned import Aligned, compared_arms, lacking
from layergate.exporters.figures.bootstrap import SumTable
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate


def _masked(valid: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.where(valid, x, 0.0)


def columns(al: Aligned, config: MetricsConfig) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    a = al.arms.get(BASELINE)
    for arm in compared_arms(al):
        x = al.arms[arm]
        p = f"rer.{arm}."
        valid = (a.ok & x.ok & (a.tokens > 0) & (x.tokens > 0)
                 & np.isfinite(a.e2e) & np.isfinite(x.e2e))
        out |= {p + "n": valid.astype(float), p + "e2e_a": _masked(valid, a.e2e),
                p + "tok_a": _masked(valid, a.tokens), p + "e2e_x": _masked(valid, x.e2e),
                p + "tok_x": _masked(valid, x.tokens)}
        dec = valid & np.isfinite(a.ttft) & np.isfinite(x.ttft) & (a.tokens >= 2) \
            & (x.tokens >= 2)
        out |= {p + "dec_n": dec.astype(float), p + "dec_a": _masked(dec, a.e2e - a.ttft),
                p + "dtok_a": _masked(dec, a.tokens - 1), p + "dec_x": _masked(dec, x.e2e - x.ttft),
                p + "dtok_x": _masked(dec, x.tokens - 1)}
        th = valid & np.isfinite(x.theoretical)
        out |= {p + "th_n": th.astype(float), p + "th_w": _masked(th, x.theoretical * x.tokens),
                p + "th_tok": _masked(th, x.tokens)}
    return out


def _rer(e2e_a, tok_a, e2e_x, tok_x):
    return 1 - (e2e_x / tok_x) / (e2e_a / tok_a)


def _realisation(e2e_a, tok_a, e2e_x, tok_x, th_w, th_tok):
    return _rer(e2e_a, tok_a, e2e_x, tok_x) / (th_w / th_tok)


def stats(al: Aligned, arm: str) -> dict[str, SumStat]:
    p = f"rer.{arm}."
    cols = (p + "e2e_a", p + "tok_a", p + "e2e_x", p + "tok_x")
    paired = (BASELINE, arm)
    return {
        RER: SumStat(_rer, cols, p + "n", lacking(al, paired, "tokens", "no request "
                                                  "succeeded with output tokens on both arms")),
        RER_DECODE: SumStat(_rer, (p + "dec_a", p + "dtok_a", p + "dec_x", p + "dtok_x"),
                            p + "dec_n", lacking(al, paired, "tokens", "no paired request "
                                                 "with TTFT and >= 2 tokens")),
        RER_THEORETICAL: SumStat(lambda w, t: w / t, (p + "th_w", p + "th_tok"), p + "th_n",
                                 lacking(al, (arm,), "extension",
                                         "the arm reported no theoretical_saving")),
        RER_REALISATION: SumStat(_realisation, cols + (p + "th_w", p + "th_tok"), p + "th_n",
                                 lacking(al, (arm,), "extension", "theoretical RER is 0 or "
                                         "unknown: nothing to realise")),
    }


def figures(table: SumTable, al: Aligned, config: MetricsConfig) -> list[Figure]:
    arms = compared_arms(al)
    out: list[Figure] = []
    for arm in arms:
        floor = stats(al, BASELINE2) if arm == CANDIDATE and BASELINE2 in arms else None
        for name, stat in stats(al, arm).items():
            noise = floor[name] if floor and name in (RER, RER_DECODE) else None
            out += estimate(table, stat, al.scenario_names, config, name, arm, noise=noise)
    return out
