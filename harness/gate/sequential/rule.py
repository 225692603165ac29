"""One rule of the sequential gate (`layergate.harness.gate.sequential.decision`) over the
judged requests in send order: its sticky pass / fail decisions after each request (`Track`)
and its state at a look (`RuleState`), worded as the fixed gate words a check
(`layergate.harness.gate.checks`).

A rule with an anytime-valid interval (`layergate.exporters.figures.sequential.figures.METHODS`)
passes once its intersected confidence sequence lies wholly on the good side of the threshold, fails
once wholly on the bad side; a decision sticks. The repeat suite's figures are judged once,
by the fixed gate, from the run's `determinism/` sub-run. A rule with no such interval, or
not computable for the run, is skipped when not required, else undecided for good.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from layergate.exporters.catalogue import DETERMINISM_FIGURES, FAIL, PASS, UNDECIDED
from layergate.exporters.figures import determinism_figures
from layergate.exporters.figures.aligned import Aligned
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.sequential import intersected
from layergate.exporters.figures.sequential.figures import METHODS, FigurePath, figure_path
from layergate.exporters.records import ArmResult
from layergate.harness.gate.checks import SKIPPED, check_figure, interval_reason
from layergate.harness.gate.policy import MetricRule


@dataclass(frozen=True)
class RuleState:
    """One rule at the look the run was decided (or the last look)."""

    name: str
    arm: str
    scenario: str
    state: str  # pass, fail, undecided, skipped
    reason: str
    counts: bool  # whether it can change the verdict (critical, and run-wide or gated)
    threshold: float | None = None
    direction: str | None = None
    method: str = ""
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    samples: int = 0
    decided_at: int | None = None  # the request after which it was decided


@dataclass(frozen=True)
class Track:
    """One rule's sticky decisions after each request in send order. `passed` None: never
    decided (`failed` None too: skipped, else undecided). A rule with a confidence sequence
    carries its `path` and intersected bounds `low` / `high`; one judged once (skipped, no
    interval for it, the repeat suite) carries its `fixed` state instead."""

    rule: MetricRule
    scenario: str
    counts: bool  # its scenario can change the verdict (overall, or gated per scenario)
    passed: np.ndarray | None
    failed: np.ndarray | None
    path: FigurePath | None = None
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    fixed: RuleState | None = None

    @property
    def gating(self) -> bool:
        return self.counts and self.rule.critical


@dataclass(frozen=True)
class RuleInputs:
    """What every rule is judged on: the judged requests aligned, their per-request
    columns in send order, each request's scenario, and the run's determinism sub-run."""

    available: int  # requests judged, in send order
    determinism: list[ArmResult] | None
    config: MetricsConfig
    aligned: Aligned
    cols: dict[str, np.ndarray]
    scenario: np.ndarray
    process_spread: float

    @property
    def alpha(self) -> float:
        return 1 - self.config.confidence


def track(rule: MetricRule, label: str, counts: bool, mask: np.ndarray | None,
           ctx: RuleInputs) -> Track:
    """The rule's decisions after each request (see `Track`)."""
    if rule.name in DETERMINISM_FIGURES:
        return _determinism_suite(rule, label, counts, ctx)
    if rule.name not in METHODS:
        return _untracked(rule, label, counts, ctx.available, "no anytime-valid "
                          "interval for this figure (not a mean over requests)")
    try:
        path = figure_path(rule.name, rule.arm, ctx.cols, ctx.aligned, rule.min_samples,
                           rule.subtract_noise_floor, ctx.alpha, mask, ctx.process_spread)
    except KeyError:
        return _untracked(rule, label, counts, ctx.available, "not computable for "
                          "this run (an arm it compares did not run)")
    low, high = intersected(path.low, path.high, path.look)
    passed, failed = _sticky(rule, low, high)
    if not rule.required:
        # not required and nothing to judge (yet): skipped, as the fixed gate skips it
        passed = passed | _nothing(path)
    return Track(rule, label, counts, passed, failed, path, low, high)


def _sticky(rule: MetricRule, low: np.ndarray, high: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """(passed, failed) after each request: decisions stick; should the intersection ever
    empty, the first side reached stands (a tie fails)."""
    if rule.direction == ">=":
        passed, failed = low >= rule.threshold, high < rule.threshold
    else:
        passed, failed = high <= rule.threshold, low > rule.threshold
    passed, failed = np.maximum.accumulate(passed), np.maximum.accumulate(failed)
    never = passed.size
    first_pass = int(np.argmax(passed)) if passed.any() else never
    first_fail = int(np.argmax(failed)) if failed.any() else never
    if first_fail <= first_pass:
        return np.zeros(never, dtype=bool), failed
    return passed, np.zeros(never, dtype=bool)


def _rule_state(rule: MetricRule, label: str, counts: bool, **state: Any) -> RuleState:
    return RuleState(name=rule.name, arm=rule.arm, scenario=label,
                     counts=counts and rule.critical, threshold=rule.threshold,
                     direction=rule.direction, **state)


def _untracked(rule: MetricRule, label: str, counts: bool, available: int, why: str
               ) -> Track:
    """A rule with no confidence sequence here: skipped when not required, else undecided
    for good."""
    if not rule.required:
        return Track(rule, label, counts, None, None,
                     fixed=_rule_state(rule, label, counts, state=SKIPPED, reason=why))
    return Track(rule, label, counts, None, np.zeros(available, dtype=bool),
                 fixed=_rule_state(rule, label, counts, state=UNDECIDED, reason=why))


def _determinism_suite(rule: MetricRule, label: str, counts: bool, ctx: RuleInputs) -> Track:
    figs = determinism_figures.figures(ctx.determinism or (), replace(
        ctx.config, min_determinism_prompts=max(rule.min_samples, 1)))
    fig = next((f for f in figs if f.name == rule.name and f.arm == rule.arm
                and f.scenario == label), None)
    check = check_figure(rule, fig, label, True)
    state = _rule_state(rule, label, counts, state=check.status,
                        reason=f"repeat suite, fixed-sample: {check.reason}",
                        estimate=check.compared, low=check.compared_low,
                        high=check.compared_high, samples=check.n)
    const = np.full(ctx.available, True)
    if check.status == PASS or check.status == SKIPPED:
        return Track(rule, label, counts, const, ~const, fixed=state)
    if check.status == FAIL:
        return Track(rule, label, counts, ~const, const, fixed=state)
    return Track(rule, label, counts, None, ~const, fixed=replace(state, state=UNDECIDED))


def state_at(track: Track, at: int) -> RuleState:
    """The rule at request index `at`: its state, interval and why."""
    if track.fixed is not None:
        return track.fixed
    rule, path = track.rule, track.path
    low, high = track.low[at], track.high[at]
    state = FAIL if track.failed[at] else PASS if track.passed[at] else UNDECIDED
    mark = track.failed if state == FAIL else track.passed if state == PASS else None
    when = int(np.argmax(mark)) + 1 if mark is not None else None
    samples = int(path.count[at])
    est = float(path.estimate[at]) if np.isfinite(path.estimate[at]) else None
    if not rule.required and _nothing(path)[at]:
        return _rule_state(rule, track.scenario, track.counts, state=SKIPPED,
                           reason="nothing to judge yet (not required)", method=path.method)
    if est is None and samples:
        reason = f"undefined over {samples} samples (e.g. a baseline prefix-cache hit rate of 0)"
    elif not path.look[at]:
        reason = f"{samples} samples, policy needs {max(rule.min_samples, 1)}"
    else:
        what = "excess over noise floor CS" if rule.subtract_noise_floor else "CS"
        reason = interval_reason(what, low, high, rule, state)
        if when is not None:
            reason += f" (decided after request {when})"
    return _rule_state(rule, track.scenario, track.counts, state=state, reason=reason,
                       method=path.method, estimate=est,
                       low=float(low) if np.isfinite(low) else None,
                       high=float(high) if np.isfinite(high) else None, samples=samples,
                       decided_at=when)


def _nothing(path: FigurePath) -> np.ndarray:
    """After each request: the figure has no value yet (no sample, or undefined)."""
    return (path.count == 0) | ~np.isfinite(path.estimate)
