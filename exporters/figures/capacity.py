"""Capacity at the SLO from the steps of a sweep, and the paired ratio between arms.

An arm's capacity is the highest load it passed (exporters/figures/capacity_step.py:
`StepArm.passes`), interpolated between the last passing step and the first failing one:
linearly in load, to where the SLO attainment crosses the target. A first failing step
whose attainment still met the target (it failed on errors or saturation) leaves the
capacity at the last passing load. No failing step: the capacity is at least the highest
load passed (`at_least`); no passing step below the first failure: `none` (the SLO is
not met at the lowest load), never 0.

The interval of a ratio (docs/METRICS.md): B resamples, each drawing the measured requests
of every step in blocks of consecutive requests (`block_length`), with the same draw for
every arm at the same load (the arms of a step got the same requests at the same intended
times, so the draw is paired); each resample's attainments, error rates and "far above
unloaded" signals go through the same pass rule and interpolation, and the interval is
the percentiles of the resampled ratios (a resample where an arm never fails is +inf, an
end there missing). The signals of the run's order and of the replayer's limit are held
fixed; a bracket that ended on any flag widens the interval to the bracket. It is one
sweep's sampling noise only: the interval that covers comes from replicate sweeps
(exporters/figures/capacity_replicates.py).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from layergate.exporters.catalogue import (
    BASELINE,
    BASELINE2,
    CAPACITY,
    CAPACITY_GOODPUT,
    CAPACITY_RATIO,
    CAPACITY_REALISATION,
)
from layergate.exporters.figures import OVERALL, Figure, saturation
from layergate.exporters.figures.capacity_step import StepArm

EXACT, AT_LEAST, NONE = "exact", "at_least", "none"


@dataclass(frozen=True)
class Capacity:
    arm: str
    value: float | None  # None when `bound` is NONE
    bound: str  # EXACT, AT_LEAST or NONE
    last_pass: float | None
    first_fail: float | None
    goodput: float | None
    steps: int

    def text(self, unit: str = "") -> str:
        if self.bound == NONE:
            return f"none (fails the SLO at its lowest step, {self.first_fail:g}{unit})"
        prefix = ">= " if self.bound == AT_LEAST else ""
        return f"{prefix}{self.value:.4g}{unit}"


def _ordered(steps: Sequence[StepArm]) -> list[StepArm]:
    return sorted(steps, key=lambda s: s.load)


def _crossing(loads: np.ndarray, att: np.ndarray, fixed_ok: np.ndarray, target: float,
              good: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised over resamples (rows of `att`): (capacity, bound code, goodput there);
    bound code 0 exact, 1 at least, 2 none."""
    passed = (att >= target) & fixed_ok
    any_fail = (~passed).any(axis=1)
    first = np.where(any_fail, np.argmax(~passed, axis=1), loads.size)
    rows = np.arange(att.shape[0])
    cap = np.full(att.shape[0], np.nan)
    gp = np.full(att.shape[0], np.nan)
    code = np.where(~any_fail, 1, np.where(first == 0, 2, 0))
    top = ~any_fail
    cap[top] = loads[-1]
    mid = any_fail & (first > 0)
    f, p = first[mid], first[mid] - 1
    a_p, a_f = att[rows[mid], p], att[rows[mid], f]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(a_f < target, (a_p - target) / (a_p - a_f), 0.0)
    share = np.clip(np.nan_to_num(share), 0.0, 1.0)
    cap[mid] = loads[p] + share * (loads[f] - loads[p])
    if good is not None:
        gp[top] = good[rows[top], -1]
        gp[mid] = good[rows[mid], p] + share * (good[rows[mid], f] - good[rows[mid], p])
    return cap, code, gp


def capacity(steps: Sequence[StepArm], attainment: float, max_error_rate: float) -> Capacity:
    """One arm's capacity from its steps (any order)."""
    s = _ordered(steps)
    loads = np.array([x.load for x in s], dtype=float)
    att = np.array([[x.attainment for x in s]])
    ok = np.array([[x.error_rate <= max_error_rate and not x.saturated and x.n > 0
                    for x in s]])
    good = np.array([[x.goodput for x in s]])
    cap, code, gp = _crossing(loads, att, ok, attainment, good)
    bound = (EXACT, AT_LEAST, NONE)[int(code[0])]
    passed = [x.load for x in s if x.passes(attainment, max_error_rate)]
    failed = [x.load for x in s if not x.passes(attainment, max_error_rate)]
    first_fail = min(failed) if failed else None
    below = [p for p in passed if first_fail is None or p < first_fail]
    return Capacity(s[0].arm if s else "", None if bound == NONE else float(cap[0]), bound,
                    max(below) if below else None, first_fail,
                    None if bound == NONE else float(gp[0]), len(s))


def block_length(n: int) -> int:
    """Requests per block of a step's resample: SLO misses cluster in busy periods, so a
    step is resampled in runs of consecutive requests (in send order), about sqrt(n) long,
    not one by one (which treated them as independent and drew too narrow an interval)."""
    return max(1, math.ceil(math.sqrt(n)))


def _draws(load: float, n: int, resamples: int, seed: int) -> np.ndarray:
    """Resample indices for one step (a circular block bootstrap over the requests in
    send order): the same for every arm at this load (paired)."""
    key = hashlib.sha256(f"{seed}:{load:.9g}:{n}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(key[:8], "little"))
    length = block_length(n)
    starts = rng.integers(0, n, size=(resamples, math.ceil(n / length)))
    runs = (starts[:, :, None] + np.arange(length)) % n
    return runs.reshape(resamples, -1)[:, :n]


def _step_ok(x: StepArm, draws: np.ndarray, max_error_rate: float) -> np.ndarray:
    """Per resample, whether the step's flags let it pass: its error rate and "far above
    unloaded" recomputed on the resample; the flags of the run's order and the replayer's
    limit (`held`), and every flag of a step stored without its per-request outcomes, as
    they were."""
    if x.n == 0:
        return np.zeros(draws.shape[0], dtype=bool)
    if not x.resamplable:
        return np.full(draws.shape[0], x.error_rate <= max_error_rate and not x.saturated)
    failed = np.array(x.failed, dtype=float)[draws]
    ttft = np.array([np.nan if t is None else t for t in x.ttft], dtype=float)[draws]
    return ((failed.mean(axis=1) <= max_error_rate) & ~saturation.far_above_unloaded(ttft)
            & (not x.held))


def resampled(steps: Sequence[StepArm], attainment: float, max_error_rate: float,
              resamples: int, seed: int) -> np.ndarray:
    """The arm's capacity on each resample (NaN where it has none)."""
    s = _ordered(steps)
    if not s:
        return np.full(resamples, np.nan)
    loads = np.array([x.load for x in s], dtype=float)
    att = np.zeros((resamples, len(s)))
    ok = np.zeros((resamples, len(s)), dtype=bool)
    for j, x in enumerate(s):
        draws = _draws(x.load, x.n, resamples, seed) if x.n else np.zeros((resamples, 0), int)
        if x.n:
            att[:, j] = np.array(x.met, dtype=float)[draws].mean(axis=1)
        ok[:, j] = _step_ok(x, draws, max_error_rate)
    cap, code, _ = _crossing(loads, att, ok, attainment)
    # a resample where the arm never fails says its capacity is beyond the ladder, not at
    # its top: +inf (set to the top load, it pulled the interval's end down to the ladder)
    return np.where(code == 2, np.nan, np.where(code == 1, np.inf, cap))


def interval(boot: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    """The percentile interval of resampled capacities or ratios, where NaN is no value
    (none when most are) and +-inf a capacity beyond the ladder: an end at +-inf is missing
    (None), which the gate judges as unbounded. The ends are order statistics (no
    interpolation toward an infinite neighbour)."""
    kept = boot[~np.isnan(boot)]
    if kept.size == 0 or kept.size * 2 < boot.size:
        return None, None
    alpha = (1 - confidence) / 2
    low = float(np.quantile(kept, alpha, method="lower"))
    high = float(np.quantile(kept, 1 - alpha, method="higher"))
    return (low if math.isfinite(low) else None), (high if math.isfinite(high) else None)


def _on_flag(c: Capacity, steps: Sequence[StepArm], attainment: float) -> bool:
    """Whether the arm's bracket ended on a flag (errors or saturation) at a first failing
    step whose attainment met the target: its capacity is somewhere in the bracket, which
    the resamples (flags held) cannot show."""
    if c.bound != EXACT or c.first_fail is None:
        return False
    first = [s for s in steps if s.load == c.first_fail]
    return bool(first) and all(s.attainment >= attainment for s in first)


def _widened(low: float | None, high: float | None, ends: tuple[float, float]
             ) -> tuple[float | None, float | None]:
    """An interval never narrower than `ends` (a missing end stays missing)."""
    return (None if low is None else min(low, ends[0]),
            None if high is None else max(high, ends[1]))


@dataclass(frozen=True)
class SweepRule:
    """The sweep's rule for a step's pass (SLO attainment, error rate) and how its
    intervals are drawn (the sweep's settings)."""

    attainment: float = 0.95
    max_error_rate: float = 0.01
    resamples: int = 1000
    seed: int = 0
    confidence: float = 0.95


def figures(steps: Sequence[StepArm], rule: SweepRule, unit: str) -> list[Figure]:
    """The catalogued capacity figures of a sweep: per arm `capacity` and
    `capacity_goodput`; per arm other than the baseline `capacity_ratio` (against the
    baseline, with baseline2's as the noise floor) and, where the engine reports its
    theoretical saving, `capacity_realisation`."""
    by_arm: dict[str, list[StepArm]] = {}
    for s in steps:
        by_arm.setdefault(s.arm, []).append(s)
    caps = {arm: capacity(v, rule.attainment, rule.max_error_rate) for arm, v in by_arm.items()}
    boots = {arm: resampled(v, rule.attainment, rule.max_error_rate, rule.resamples,
                            rule.seed) for arm, v in by_arm.items()}
    # arm -> the range its capacity may take: its bracket when that ended on a flag
    spans = {arm: (c.last_pass, c.first_fail) if _on_flag(c, by_arm[arm], rule.attainment)
             and c.last_pass is not None else (c.value, c.value) for arm, c in caps.items()}
    out: list[Figure] = []
    for arm, c in caps.items():
        detail = {"bound": c.bound, "unit": unit, "last_pass": c.last_pass,
                  "first_fail": c.first_fail, "text": c.text(f" {unit}")}
        low, high = interval(boots[arm], rule.confidence)
        if c.value is not None and low is not None:
            low, high = _widened(low, high, spans[arm])
        status, reason = _status({arm: c})
        out.append(Figure(CAPACITY, c.value, arm, OVERALL, low, high, n=c.steps,
                          status=status, reason=reason, detail=detail))
        out.append(Figure(CAPACITY_GOODPUT, c.goodput, arm, OVERALL, n=c.steps,
                          status=status, reason=reason, detail=dict(detail)))
    base = caps.get(BASELINE)
    if base is None:
        return out
    ratios = {arm: _ratio(caps, boots, arm, rule, spans) for arm in caps if arm != BASELINE}
    floor = ratios.get(BASELINE2)
    floor_boot = floor.detail.get("boot") if floor is not None else None
    for arm, fig in ratios.items():
        if arm != BASELINE2:
            fig = _with_floor(fig, floor, floor_boot, rule)
        fig.detail.pop("boot", None)
        out.append(fig)
        realisation = _realisation(fig, by_arm[arm])
        if realisation is not None:
            out.append(realisation)
    return out


def _status(caps: dict[str, Capacity]) -> tuple[str, str]:
    for arm, c in caps.items():
        if c.bound == NONE:
            return "not_computable", f"{arm} fails the SLO at its lowest step"
        if c.bound == AT_LEAST:
            return "not_computable", (f"{arm}'s capacity is only a lower bound (>= {c.value:g}):"
                                      " the sweep's bounds ended its ladder first")
    return "ok", ""


def _ratio(caps: dict[str, Capacity], boots: dict[str, np.ndarray], arm: str,
           rule: SweepRule, spans: dict[str, tuple]) -> Figure:
    a, x = caps[BASELINE], caps[arm]
    value = x.value / a.value if a.value and x.value is not None else None
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = boots[arm] / boots[BASELINE]
    low, high = interval(boot, rule.confidence) if value is not None else (None, None)
    if value is not None and low is not None:
        (x_lo, x_hi), (a_lo, a_hi) = spans[arm], spans[BASELINE]
        low, high = _widened(low, high, (x_lo / a_hi, x_hi / a_lo))
    status, reason = _status({BASELINE: a, arm: x})
    return Figure(CAPACITY_RATIO, value, arm, OVERALL, low, high, n=min(a.steps, x.steps),
                  status=status, reason=reason, detail={"boot": boot})


def _with_floor(fig: Figure, floor: Figure | None, floor_boot: np.ndarray | None,
                rule: SweepRule) -> Figure:
    """The candidate's ratio with its excess over baseline2's (the noise floor); with no
    baseline2, over 1."""
    boot = fig.detail.pop("boot")
    if fig.value is None:
        return fig
    if floor is None or floor.value is None:
        low, high = fig.ci_low, fig.ci_high
        fig.detail.update(excess=fig.value - 1, excess_floor="1 (no baseline2 arm)",
                          excess_ci=[None if low is None else low - 1,
                                     None if high is None else high - 1])
        return fig
    with np.errstate(invalid="ignore"):
        e_low, e_high = interval(boot - floor_boot, rule.confidence)
    fig.detail.update(excess=fig.value - floor.value, excess_ci=[e_low, e_high])
    return Figure(fig.name, fig.value, fig.arm, fig.scenario, fig.ci_low, fig.ci_high, fig.n,
                  fig.status, fig.reason, noise_floor=floor.value, detail=fig.detail)


def _realisation(ratio: Figure, steps: Sequence[StepArm]) -> Figure | None:
    """(ratio - 1) / (1 / (1 - s) - 1): the capacity gained against the speed-up the
    engine's theoretical saving s would give; None where the arm reports no saving."""
    savings = [s.theoretical for s in steps if s.theoretical is not None]
    if not savings or ratio.value is None:
        return None
    saving = float(np.mean(savings))
    detail = {"theoretical_saving": saving, "theoretical_ratio": 1 / (1 - saving)
              if saving < 1 else None}
    if not 0 < saving < 1:
        return Figure(CAPACITY_REALISATION, None, ratio.arm, OVERALL, status="not_computable",
                      reason=f"theoretical saving {saving:g}: no speed-up to realise",
                      detail=detail)
    value = (ratio.value - 1) / (1 / (1 - saving) - 1)
    return Figure(CAPACITY_REALISATION, value, ratio.arm, OVERALL, n=ratio.n,
                  status=ratio.status, reason=ratio.reason, detail=detail)
