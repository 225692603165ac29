"""The anytime-valid path of a catalogued figure over requests in send order, from the
per-request columns the calculators build (`rer.columns`, `consistency.columns`, ...), so
the sequential gate and the fixed one read the same numbers.

How each figure's interval is built (`METHODS`):

- `share`: a share of requests (exact match, termination kinds, goodput) is the mean of a
  0/1 value over its valid requests: the betting CS on [0, 1]; its excess over the noise
  floor is the mean of the paired difference B - A' on [-1, 1] (requests valid on both).
- `log_mean`: latency_ratio = exp(mean log ratio): Lai's t-mixture on the log ratios.
- `linearised`: any other function of sums (RER, first divergence, BLEU, chrF, token KL,
  token efficiency, cache-hit delta): the normal mixture on its delta-method linearisation
  (asymptotic: acted on from the rule's minimum sample count); RER on the log of its
  time-per-token ratio; an excess as the linearised difference B - A'. The cache-hit delta
  |h_B - h_A| / h_A comes from the per-request extension (the counters are only read after
  the run): its signed form is linearised and the interval folded at 0 (no excess).

Figures not listed (percentiles, jitter, counters, the repeat suite) have no per-request
path here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from exporters import consistency, rer
from exporters.aligned import Aligned
from exporters.catalogue import (
    BASELINE2,
    BLEU,
    CACHE_HIT_DELTA,
    CHRF,
    EXACT_MATCH,
    FIRST_DIVERGENCE,
    GOODPUT,
    LATENCY_RATIO,
    RER,
    RER_DECODE,
    TERMINATION_ACCURACY,
    TERMINATION_OVERRUN,
    TERMINATION_PREMATURE,
    TERMINATION_TRUNCATED,
    TOKEN_EFFICIENCY,
    TOKEN_KL,
)
from exporters.sequential.betting import bounded_mean_path
from exporters.sequential.normal_mixture import linearised_path
from exporters.sequential.t_mixture import t_mean_path

Method = Literal["share", "log_mean", "linearised"]
N_OPT = 50  # the mixtures are tightest near the fixed gate's usual 48 requests

_SHARES = {EXACT_MATCH: ("cons.{}.exact", "cons.{}.n"),
           TERMINATION_ACCURACY: ("term.{}.correct", "term.{}.n"),
           TERMINATION_TRUNCATED: ("term.{}.truncated", "term.{}.n"),
           TERMINATION_PREMATURE: ("term.{}.premature", "term.{}.n"),
           TERMINATION_OVERRUN: ("term.{}.overrun", "term.{}.n"),
           GOODPUT: ("lat.{}.good", "lat.{}.n")}
_LINEARISED = (RER, RER_DECODE, FIRST_DIVERGENCE, BLEU, CHRF, TOKEN_KL, TOKEN_EFFICIENCY,
               CACHE_HIT_DELTA)
METHODS: dict[str, Method] = {**dict.fromkeys(_SHARES, "share"), LATENCY_RATIO: "log_mean",
                              **dict.fromkeys(_LINEARISED, "linearised")}


@dataclass(frozen=True)
class FigurePath:
    """After each request in send order: the estimate, the interval (not yet intersected:
    `exporters.sequential.intersected` watches it) and the samples counted so far;
    `look` marks the requests after which the interval may be acted on."""

    method: Method
    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    count: np.ndarray
    look: np.ndarray


def _spread(rows: np.ndarray, values: tuple[np.ndarray, ...], fill: float
            ) -> tuple[np.ndarray, ...]:
    """Arrays over observations (the `rows` that are True) laid over every request: each
    request shows the value after the last observation up to it; `fill` before the first."""
    idx = np.cumsum(rows) - 1
    return tuple(np.where(idx >= 0, v[np.maximum(idx, 0)] if v.size else fill, fill)
                 for v in values)


def _sum_stat(al: Aligned, name: str, arm: str):
    stats = rer.stats(al, arm) if name in (RER, RER_DECODE) else consistency.stats(al, arm)
    return stats[name]


def _linear_parts(name: str, arm: str, cols: dict[str, np.ndarray], al: Aligned
                  ) -> tuple[np.ndarray, Callable, np.ndarray]:
    """The columns (requests x m), the statistic of their means, and its count column."""
    if name == CACHE_HIT_DELTA:
        p = f"chd.{arm}."
        return (np.column_stack([cols[p + c] for c in ("ha", "qa", "hx", "qx")]),
                lambda ha, qa, hx, qx: (hx / qx) / (ha / qa) - 1, cols[p + "n"])
    if name == TOKEN_EFFICIENCY:
        p = f"lat.{arm}."
        return (np.c_[cols[p + "useful"], cols[p + "computed"]], lambda u, c: u / c,
                cols[p + "eff_n"])
    stat = _sum_stat(al, name, arm)
    return np.column_stack([cols[c] for c in stat.columns]), stat.fn, cols[stat.count]


def figure_path(name: str, arm: str, cols: dict[str, np.ndarray], al: Aligned,
                min_samples: int, excess: bool = False, alpha: float = 0.05,
                rows: np.ndarray | None = None) -> FigurePath:
    """The path of figure `name` of `arm` (its `excess` over the noise floor, baseline2
    against the baseline, when asked) over the requests whose columns `cols` holds, in
    that order, restricted to `rows` (a scenario) when given. KeyError: a figure with
    no method here (see `METHODS`) or columns missing for the arm."""
    method = METHODS[name]
    n = next(iter(cols.values())).size
    rows = np.ones(n, dtype=bool) if rows is None else rows
    if method == "share":
        num, cnt = (t.format(arm) for t in _SHARES[name])
        valid = (cols[cnt] > 0) & rows
        values = cols[num]
        lo = 0.0
        if excess:
            num2, cnt2 = (t.format(BASELINE2) for t in _SHARES[name])
            valid &= cols[cnt2] > 0
            values, lo = values - cols[num2], -1.0
        x = values[valid]
        obs_look = np.arange(1, x.size + 1) >= min_samples
        if x.size:
            est, low, high = bounded_mean_path(x, lo, 1.0, alpha, looks=obs_look)
        else:
            est = low = high = np.empty(0)
        count = np.cumsum(valid)
        est, low, high = _spread(valid, (est, low, high), np.nan)
        return FigurePath(method, est, low, high, count, count >= max(min_samples, 1))
    if method == "log_mean":
        p = f"lat.{arm}."
        valid = (cols[p + "lr_n"] > 0) & rows
        x = cols[p + "logr"][valid]
        if x.size:
            mean, low, high = t_mean_path(x, alpha, N_OPT)
            est, low, high = np.exp(mean), np.exp(low), np.exp(high)
        else:
            est = low = high = np.empty(0)
        count = np.cumsum(valid)
        est, low, high = _spread(valid, (est, low, high), np.nan)
        return FigurePath(method, est, low, high, count, count >= max(min_samples, 2))
    if excess and name == CACHE_HIT_DELTA:
        raise KeyError(f"{name}: no sequential excess over the noise floor")
    x, fn, cnt = _linear_parts(name, arm, cols, al)
    count_col = cnt
    if excess:
        x2, fn2, cnt2 = _linear_parts(name, BASELINE2, cols, al)
        m = x.shape[1]
        x = np.c_[x, x2]
        fn = (lambda f1, f2, m: lambda *s: f1(*s[:m]) - f2(*s[m:]))(fn, fn2, m)
        count_col = np.minimum(cnt, cnt2)
    log_rer = name in (RER, RER_DECODE) and not excess
    stat = (lambda *s: np.log1p(-fn(*s))) if log_rer else fn
    x = x[rows]
    if x.shape[0]:
        est, low, high = linearised_path(x, stat, alpha, N_OPT)
        if log_rer:  # RER = 1 - exp(log ratio): decreasing, so the ends swap
            est, low, high = -np.expm1(est), -np.expm1(high), -np.expm1(low)
        if name == CACHE_HIT_DELTA:  # |signed|: an interval across 0 folds to [0, ...]
            low, high = (np.where((low <= 0) & (high >= 0), 0.0,
                                  np.minimum(np.abs(low), np.abs(high))),
                         np.maximum(np.abs(low), np.abs(high)))
            est = np.abs(est)
    else:
        est = low = high = np.empty(0)
    count = np.cumsum(np.where(rows, count_col, 0.0))
    est, low, high = _spread(rows, (est, low, high), np.nan)
    finite = np.isfinite(est) & np.isfinite(low) & np.isfinite(high)
    return FigurePath(method, est, low, high, count, (count >= max(min_samples, 2)) & finite)
