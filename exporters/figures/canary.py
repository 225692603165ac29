"""The figures a live canary allows: each arm's own metrics over the same window, compared
side by side (never the canary against yesterday), with anytime-valid intervals.

A window gives, per arm, the increase of each metric role over the window (`ArmWindow`):
the `_sum` and `_count` of the latency histograms, and counters. From the windows of a
stage, each figure has an estimate and a confidence sequence
(`layergate.exporters.figures.sequential`):

- `e2e_ratio`, `ttft_ratio`, `tpot_ratio`: a window observes log(mean_B / mean_A), with
  mean = Δsum / Δcount of the histogram; Lai's t-mixture on the logs, exponentiated.
- `tpot_rer`: the same observation as `tpot_ratio`; 1 - the ratio's interval (the share
  of time per output token the candidate saves).
- `error_rate_delta`: errors and requests of each arm, summed over the stage; one
  beta-binomial sequence per arm at alpha / 2, B's minus A's.
- `cache_hit_rate_delta`: hit rate_B - hit rate_A per window (Δhits / Δqueries); Lai's.
- `layers_executed_share`: Δexecuted / (Δexecuted + Δskipped) of the candidate; Lai's.
- `spec_accept_length`: 1 + Δaccepted / Δdrafts of the candidate's speculative decoding
  (the same figure a replay gives from the answers); Lai's.

The latency figures (the three ratios and `tpot_rer`) carry the between-process term the
fixed gate carries (exporters/figures/process_spread.py): each arm's engine process has a
log speed factor u ~ N(0, tau^2) for its whole life, so every window's log ratio holds the
same u_B - u_A, of SD sqrt(2) tau, which no number of windows averages out. The interval is
widened by `process_margin`, z(1 - alpha_p / 2) sqrt(2) tau in log ratio, added to the
sequence's radius on both sides (as the sequential gate adds it).

Latency ratios are taken in logs because a ratio's distribution is skewed and its log is
near-Gaussian once a window holds several requests; windows are the unit, not requests,
because Prometheus only gives sums per window. Consistency (exact match, BLEU, token KL)
and termination accuracy need both arms' answers to the same request: a live canary serves
each request once, so those stay with `layergate gate` on a shadow replay.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

from layergate.exporters.catalogue import LIVE_FIGURES, FigureSpec, LiveScale
from layergate.exporters.figures.sequential import rate_difference_sequence, t_mean_sequence

TIMED: tuple[LiveScale, ...] = ("log_ratio", "saving")  # the scales a process moves


def process_margin(tau: float, alpha: float) -> float:
    """The between-process margin of a live latency figure, in log ratio: u_B - u_A has SD
    sqrt(2) tau, and lies within z(1 - alpha / 2) of it with probability 1 - alpha (0 when
    tau or alpha is 0)."""
    if tau <= 0 or alpha <= 0:
        return 0.0
    return NormalDist().inv_cdf(1 - alpha / 2) * math.sqrt(2) * tau


def available(figure: FigureSpec, roles: Sequence[str] | set[str]) -> bool:
    """Whether an engine exposing `roles` gives enough to compute `figure`."""
    return all(any(alt in roles for alt in need.split("|")) for need in figure.roles)


@dataclass(frozen=True)
class ArmWindow:
    """Increases over one window of one arm: role -> value ("e2e_sum", "e2e_count",
    "requests", ...). A role absent from `values` had no series at all."""

    values: Mapping[str, float] = field(default_factory=dict)

    def get(self, key: str) -> float | None:
        return self.values.get(key)

    def mean(self, histogram: str) -> float | None:
        total, count = self.get(f"{histogram}_sum"), self.get(f"{histogram}_count")
        if total is None or not count or count <= 0 or total <= 0:
            return None
        return total / count

    def share(self, part: str, other: str) -> float | None:
        a, b = self.get(part), self.get(other)
        if a is None or b is None or a + b <= 0:
            return None
        return a / (a + b)


@dataclass(frozen=True)
class Window:
    """Both arms over the same [start, end] (Unix seconds)."""

    start: float
    end: float
    baseline: ArmWindow
    candidate: ArmWindow


def observation(name: str, w: Window) -> float | None:
    """The window's observation for figure `name` (on the scale its interval is built on),
    or None when the window says nothing about it."""
    figure = LIVE_FIGURES[name]
    if figure.scale in ("log_ratio", "saving"):
        a, b = w.baseline.mean(figure.roles[0]), w.candidate.mean(figure.roles[0])
        return None if a is None or b is None else math.log(b / a)
    if figure.scale == "difference":
        a = _hit_rate(w.baseline)
        b = _hit_rate(w.candidate)
        return None if a is None or b is None else b - a
    if figure.scale == "share":
        return w.candidate.share("layers_executed", "layers_skipped")
    if figure.scale == "accept_length":
        drafts, accepted = w.candidate.get("spec_drafts"), w.candidate.get("spec_accepted")
        return None if drafts is None or accepted is None or drafts <= 0 \
            else 1 + accepted / drafts
    return None  # rate_delta: counts, summed over the stage


def _hit_rate(arm: ArmWindow) -> float | None:
    queries, hits = arm.get("cache_queries"), arm.get("cache_hits")
    if queries is None or hits is None or queries <= 0:
        return None
    return min(hits / queries, 1.0)


def _error_counts(arm: ArmWindow) -> tuple[float, float] | None:
    requests = arm.get("requests")
    if requests is None:
        return None
    errors = arm.get("errors")
    if errors is None and arm.get("successes") is not None:  # engines that count successes
        errors = max(requests - arm.get("successes"), 0.0)
    # no error series yet counts as 0: a labelled series appears with its first increment
    return min(errors or 0.0, requests), requests


@dataclass(frozen=True)
class Evidence:
    """A figure over the windows of a stage: the estimate and its anytime-valid interval
    on the figure's own scale, the windows it rests on, and the last window's value."""

    name: str
    n: int
    estimate: float | None
    low: float | None
    high: float | None
    last: float | None = None
    history: tuple[float | None, ...] = ()  # each window's own value, on the figure's scale


def evidence(name: str, windows: Sequence[Window], alpha: float, n_opt: int,
             margin: float = 0.0) -> Evidence:
    """Figure `name` over `windows`, valid at level `alpha` however often it is looked at;
    a latency figure's interval widened by `margin` (log ratio) on each side: the
    between-process term, `process_margin`."""
    figure = LIVE_FIGURES[name]
    if figure.scale == "rate_delta":
        return _rate_evidence(name, windows, alpha)
    seen = [observation(name, w) for w in windows]
    xs = [x for x in seen if x is not None]
    history = tuple(None if x is None else _value(figure.scale, x) for x in seen)
    if not xs:
        return Evidence(name, 0, None, None, None, history=history)
    b = t_mean_sequence(xs, alpha, n_opt)
    pad = margin if figure.scale in TIMED else 0.0
    low, high = (_bound(figure.scale, b.low - pad), _bound(figure.scale, b.high + pad))
    if figure.scale == "saving":  # 1 - ratio: the interval flips
        low, high = high, low
    return Evidence(name, b.n, _value(figure.scale, b.estimate), low, high, history[-1],
                    history)


def _value(scale: LiveScale, x: float) -> float:
    """An observation (or the mean of some) on the figure's own scale (a log ratio past
    what a float holds: infinite)."""
    try:
        if scale == "log_ratio":
            return math.exp(x)
        if scale == "saving":
            return -math.expm1(x)
    except OverflowError:
        return math.inf if scale == "log_ratio" else -math.inf
    return x


def _bound(scale: LiveScale, x: float) -> float | None:
    """An end of the interval on the figure's scale; None: unbounded."""
    value = None if math.isinf(x) else _value(scale, x)
    return None if value is None or math.isinf(value) else value


def _rate_evidence(name: str, windows: Sequence[Window], alpha: float) -> Evidence:
    totals = [0.0, 0.0, 0.0, 0.0]  # errors_b, requests_b, errors_a, requests_a
    history: list[float | None] = []
    for w in windows:
        b, a = _error_counts(w.candidate), _error_counts(w.baseline)
        if b is None or a is None or b[1] <= 0 or a[1] <= 0:
            history.append(None)
            continue
        for i, v in enumerate((*b, *a)):
            totals[i] += v
        history.append(b[0] / b[1] - a[0] / a[1])
    counted = sum(x is not None for x in history)
    if not counted:
        return Evidence(name, 0, None, None, None, history=tuple(history))
    eb, nb, ea, na = (round(v) for v in totals)  # extrapolated increases are fractional
    nb, na = max(nb, 1), max(na, 1)
    bound = rate_difference_sequence(min(eb, nb), nb, min(ea, na), na, alpha)
    return Evidence(name, counted, bound.estimate, bound.low, bound.high, history[-1],
                    tuple(history))
