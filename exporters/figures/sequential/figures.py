"""The anytime-valid path of a catalogued figure over requests in send order, from the
per-request columns the calculators build (`rer.columns`, `consistency.columns`, ...), so
the sequential gate and the fixed one read the same numbers.

How each figure's interval is built (`METHODS`):

- `share`: a share of requests (exact match, termination kinds, goodput) is the mean of a
  0/1 value over its valid requests: the betting CS on [0, 1]; its excess over the noise
  floor is the mean of the paired difference B - A' on [-1, 1] (requests valid on both).
  Accuracy against references: `accuracy`, `right_to_wrong`, `wrong_to_right` are shares
  the same way; `accuracy_delta` is the mean of the paired value right(X) - right(A) in
  {-1, 0, 1} over requests with a reference both answered: the betting CS on [-1, 1]
  (anytime-valid, exact at every n), its excess the mean of that minus A''s on [-2, 2].
- `log_mean`: latency_ratio, ttft_latency_ratio, tpot_latency_ratio = exp(mean log
  ratio): Lai's t-mixture on the per-request log ratios. Their excess over the noise floor
  is the fixed gate's B/A - A'/A (each a geometric mean over its own paired requests): the
  normal mixture on its linearisation; a run without baseline2 compares B/A - 1.
- `linearised`: any other function of sums (RER, first divergence, BLEU, chrF, token KL,
  token efficiency, cache-hit delta): the normal mixture on its delta-method linearisation
  (asymptotic: acted on from the rule's minimum sample count); RER on the log of its
  time-per-token ratio; an excess as the linearised difference B - A'. The cache-hit delta
  |h_B - h_A| / h_A comes from the per-request numbers (the counters are only read after
  the run): its signed form is linearised and the interval folded at 0 (no excess).

Timing figures (RER, decode RER, the latency ratios) carry the between-process term as the
fixed gate does (exporters/figures/process_spread.py): each arm's engine process has a log speed
factor u ~ N(0, tau^2), tau the policy's `process_spread` pooled, look by look, with the
judged prefix's own A'/A log ratio as the fixed gate pools it (`own_spread`: only ever
wider than the prior). It moves every request of an arm
together, so no number of requests shrinks it: the interval is widened by a margin,
z(1 - alpha/2) times the term's SD, added to the CS radius (in log ratio, u_X - u_A: SD
sqrt(2) tau; for an excess R_B - R_A', SD sqrt(2 (R_B^2 + R_A'^2 - R_B R_A')) tau at the
point estimates, the two sharing u_A).

Figures not listed (percentiles, jitter, counters, the repeat suite) have no per-request
path here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np

from layergate.exporters.catalogue import (
    ACCURACY,
    ACCURACY_DELTA,
    BASELINE2,
    BLEU,
    CACHE_HIT_DELTA,
    CANDIDATE,
    CHRF,
    EXACT_MATCH,
    FIRST_DIVERGENCE,
    GOODPUT,
    LATENCY_RATIO,
    RER,
    RER_DECODE,
    RIGHT_TO_WRONG,
    TERMINATION_ACCURACY,
    TERMINATION_OVERRUN,
    TERMINATION_PREMATURE,
    TERMINATION_TRUNCATED,
    TOKEN_EFFICIENCY,
    TOKEN_KL,
    TPOT_LATENCY_RATIO,
    TTFT_LATENCY_RATIO,
    WRONG_TO_RIGHT,
    figure_spec,
)
from layergate.exporters.figures import consistency, rer
from layergate.exporters.figures.aligned import Aligned
from layergate.exporters.figures.process_spread import PRIOR_WEIGHT, to_ratio
from layergate.exporters.figures.sequential.betting import bounded_mean_path
from layergate.exporters.figures.sequential.normal_mixture import linearised_path
from layergate.exporters.figures.sequential.t_mixture import t_mean_path

Method = Literal["share", "log_mean", "linearised"]
N_OPT = 50  # the mixtures are tightest near the fixed gate's usual 48 requests

_SHARES = {EXACT_MATCH: ("cons.{}.exact", "cons.{}.n"),
           TERMINATION_ACCURACY: ("term.{}.correct", "term.{}.n"),
           TERMINATION_TRUNCATED: ("term.{}.truncated", "term.{}.n"),
           TERMINATION_PREMATURE: ("term.{}.premature", "term.{}.n"),
           TERMINATION_OVERRUN: ("term.{}.overrun", "term.{}.n"),
           GOODPUT: ("lat.{}.good", "lat.{}.n"),
           ACCURACY: ("acc.{}.right", "acc.{}.n"),
           RIGHT_TO_WRONG: ("acc.{}.rw", "acc.{}.pair"),
           WRONG_TO_RIGHT: ("acc.{}.wr", "acc.{}.pair")}
# paired differences of two 0/1 columns, in [-1, 1]: (plus - minus) over the count
_DIFFERENCES = {ACCURACY_DELTA: ("acc.{}.wr", "acc.{}.rw", "acc.{}.pair")}
_LINEARISED = (RER, RER_DECODE, FIRST_DIVERGENCE, BLEU, CHRF, TOKEN_KL, TOKEN_EFFICIENCY,
               CACHE_HIT_DELTA)
_LOG_RATIOS = {LATENCY_RATIO: "", TTFT_LATENCY_RATIO: "ttft_", TPOT_LATENCY_RATIO: "tpot_"}
METHODS: dict[str, Method] = {**dict.fromkeys(_SHARES, "share"),
                              **dict.fromkeys(_DIFFERENCES, "share"),
                              **dict.fromkeys(_LOG_RATIOS, "log_mean"),
                              **dict.fromkeys(_LINEARISED, "linearised")}


@dataclass(frozen=True)
class FigurePath:
    """After each request in send order: the estimate, the interval (not yet intersected:
    `layergate.exporters.figures.sequential.intersected` watches it) and the samples counted so far;
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
    if name in _LOG_RATIOS:  # exp(mean log ratio): the fixed gate's statistic
        p = f"lat.{arm}.{_LOG_RATIOS[name]}"
        return (np.c_[cols[p + "logr"], cols[p + "lr_n"]], lambda s, n: np.exp(s / n),
                cols[p + "lr_n"])
    if name == TOKEN_EFFICIENCY:
        p = f"lat.{arm}."
        return (np.c_[cols[p + "useful"], cols[p + "computed"]], lambda u, c: u / c,
                cols[p + "eff_n"])
    stat = _sum_stat(al, name, arm)
    return np.column_stack([cols[c] for c in stat.columns]), stat.fn, cols[stat.count]


# the A'/A log ratio whose spread widens each timing figure's margin (RER: of E2E per
# token, as the fixed gate's time ratio; decode RER: of TPOT)
_OWN_KIND = {RER: "", RER_DECODE: "tpot_", **_LOG_RATIOS}


def own_spread(prior: float, cols: dict[str, np.ndarray], kind: str, n: int) -> np.ndarray:
    """tau after each request: the prior pooled with the prefix's own A'/A evidence as the
    fixed gate pools it (exporters/figures/process_spread.py: the mean log A'/A ratio d, its
    variance v, (d^2 - v)/2 an estimate of tau^2, the prior as PRIOR_WEIGHT observations),
    never below the prior. Only ever wider, so the sequence stays anytime-valid; without
    baseline2 (or tau 0) the prior throughout."""
    p = f"lat.{BASELINE2}.{kind}"
    if prior <= 0 or p + "logr" not in cols:
        return np.full(n, float(prior))
    valid = cols[p + "lr_n"] > 0
    x = np.where(valid, cols[p + "logr"], 0.0)
    k = np.cumsum(valid)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.cumsum(x) / k
        var = (np.cumsum(x * x) - k * mean ** 2) / (k - 1) / k
        seen = np.where(k >= 2, np.maximum(0.0, (mean ** 2 - var) / 2), 0.0)
    seen = np.nan_to_num(seen, nan=0.0, posinf=0.0)
    pooled = (PRIOR_WEIGHT * prior ** 2 + seen) / (PRIOR_WEIGHT + 1)
    return np.sqrt(np.maximum(prior ** 2, pooled))


def figure_path(name: str, arm: str, cols: dict[str, np.ndarray], al: Aligned,
                min_samples: int, excess: bool = False, alpha: float = 0.05,
                rows: np.ndarray | None = None, process_spread: float = 0.0) -> FigurePath:
    """The path of figure `name` of `arm` (its `excess` over the noise floor, baseline2
    against the baseline, when asked) over the requests whose columns `cols` holds, in
    that order, restricted to `rows` (a scenario) when given; a timing figure's interval
    widened by the between-process margin for `process_spread` (tau). KeyError: a figure
    with no method here (see `METHODS`) or columns missing for the arm."""
    method = METHODS[name]
    n = next(iter(cols.values())).size
    rows = np.ones(n, dtype=bool) if rows is None else rows
    if method == "share":
        return _share_path(name, arm, cols, min_samples, excess, alpha, rows)
    z = NormalDist().inv_cdf(1 - alpha / 2) if figure_spec(name).timing else 0.0
    # of a log time ratio u_X - u_A, per request: tau pooled with the prefix's own A'/A
    margin = z * np.sqrt(2) * own_spread(process_spread, cols, _OWN_KIND.get(name, ""), n)
    if method == "log_mean":
        kind = _LOG_RATIOS[name]
        if excess and arm == CANDIDATE and f"lat.{BASELINE2}.{kind}lr_n" not in cols:
            # no second baseline: the floor of a time ratio is 1 (as the fixed gate)
            path = _log_mean_path(kind, arm, cols, min_samples, alpha, rows, margin)
            return FigurePath(method, path.estimate - 1, path.low - 1, path.high - 1,
                              path.count, path.look)
        if not excess:
            return _log_mean_path(kind, arm, cols, min_samples, alpha, rows, margin)
    elif excess and name == CACHE_HIT_DELTA:
        raise KeyError(f"{name}: no sequential excess over the noise floor")
    x, fn, cnt = _linear_parts(name, arm, cols, al)
    count_col = cnt
    parts = (fn,)
    if excess:
        x2, fn2, cnt2 = _linear_parts(name, BASELINE2, cols, al)
        m = x.shape[1]
        x = np.c_[x, x2]
        fn = (lambda f1, f2, m: lambda *s: f1(*s[:m]) - f2(*s[m:]))(fn, fn2, m)
        parts = ((lambda f, m: lambda *s: f(*s[:m]))(parts[0], m),
                 (lambda f, m: lambda *s: f(*s[m:]))(fn2, m))
        count_col = np.minimum(cnt, cnt2)
    log_rer = name in (RER, RER_DECODE) and not excess
    stat = (lambda *s: np.log1p(-fn(*s))) if log_rer else fn
    x, margin = x[rows], margin[rows]
    if x.shape[0]:
        est, low, high = linearised_path(x, stat, alpha, N_OPT)
        if log_rer:  # RER = 1 - exp(log ratio): decreasing, so the ends swap
            est, low, high = -np.expm1(est), -np.expm1(high + margin), -np.expm1(low - margin)
        elif excess and margin.any():
            # R_B - R_A' with R the time ratio (1 - RER for a saving), the two sharing u_A
            means = np.cumsum(x, axis=0) / np.arange(1, x.shape[0] + 1)[:, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                r_b, r_a2 = (np.asarray(to_ratio(f(*means.T), figure_spec(name).timing))
                             for f in parts)
                wide = margin * np.sqrt(np.maximum(r_b**2 + r_a2**2 - r_b * r_a2, 0.0))
            low, high = low - wide, high + wide
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
    return FigurePath(method if not excess or method != "log_mean" else "linearised", est,
                      low, high, count, (count >= max(min_samples, 2)) & finite)


def _share_path(name: str, arm: str, cols: dict[str, np.ndarray], min_samples: int,
                excess: bool, alpha: float, rows: np.ndarray) -> FigurePath:
    def value(of: str) -> tuple[np.ndarray, str, float]:
        """The per-request value of `of`'s figure, its count column, its lowest value."""
        if name in _DIFFERENCES:
            plus, minus, cnt = (t.format(of) for t in _DIFFERENCES[name])
            return cols[plus] - cols[minus], cnt, -1.0
        num, cnt = (t.format(of) for t in _SHARES[name])
        return cols[num], cnt, 0.0

    values, cnt, lo = value(arm)
    valid = (cols[cnt] > 0) & rows
    hi = 1.0
    if excess:
        values2, cnt2, lo2 = value(BASELINE2)
        valid &= cols[cnt2] > 0
        values, lo, hi = values - values2, lo - 1.0, hi - lo2
    x = values[valid]
    obs_look = np.arange(1, x.size + 1) >= min_samples
    if x.size:
        est, low, high = bounded_mean_path(x, lo, hi, alpha, looks=obs_look)
    else:
        est = low = high = np.empty(0)
    count = np.cumsum(valid)
    est, low, high = _spread(valid, (est, low, high), np.nan)
    return FigurePath("share", est, low, high, count, count >= max(min_samples, 1))


def _log_mean_path(kind: str, arm: str, cols: dict[str, np.ndarray], min_samples: int,
                   alpha: float, rows: np.ndarray, margin: float) -> FigurePath:
    """exp(mean log ratio) with the t-mixture on the log ratios, widened by `margin`."""
    p = f"lat.{arm}.{kind}"
    valid = (cols[p + "lr_n"] > 0) & rows
    x, margin = cols[p + "logr"][valid], margin[valid]
    if x.size:
        mean, low, high = t_mean_path(x, alpha, N_OPT)
        est, low, high = np.exp(mean), np.exp(low - margin), np.exp(high + margin)
    else:
        est = low = high = np.empty(0)
    count = np.cumsum(valid)
    est, low, high = _spread(valid, (est, low, high), np.nan)
    return FigurePath("log_mean", est, low, high, count, count >= max(min_samples, 2))
