"""One rule against one figure: pass, fail or inconclusive, and why.

A metric passes only when its whole confidence interval is on the good side of the
threshold and fails only when it is wholly on the bad side; anything in between, too few
samples, or a figure that could not be computed is inconclusive (never a pass).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from layergate.exporters.catalogue import (
    CANDIDATE,
    COMPLETE,
    ERROR_RATE,
    EVERY_ARM,
    FAIL,
    INCONCLUSIVE,
    OVERALL,
    PASS,
    TIED,
    UNDECIDED,
    Verdict,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.error_bound import error_upper_bound, requests_to_show
from layergate.harness.gate.policy import MetricRule

INF = float("inf")

# a check is judged like a verdict, or skipped (not required, not computed), or only shown
SKIPPED, INFO = "skipped", "info"
CheckStatus = Literal[Verdict, "skipped", "info"]
# worst first, for tables and exit codes
STATUS_ORDER: dict[str, int] = {s: i for i, s in enumerate((FAIL, INCONCLUSIVE, PASS, SKIPPED,
                                                             INFO))}


@dataclass(frozen=True)
class Check:
    """The gate's judgement of one figure.

    `value` / `ci_low` / `ci_high` are the figure as computed; `compared*` are what met
    the threshold (the excess over the noise floor when the rule subtracts it).
    `counts` says whether this row can change the verdict.
    """

    name: str
    scenario: str
    arm: str
    status: CheckStatus
    reason: str
    counts: bool
    critical: bool = False
    threshold: float | None = None
    direction: str | None = None
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    noise_floor: float | None = None
    compared: float | None = None
    compared_low: float | None = None
    compared_high: float | None = None
    subtract_noise_floor: bool = False
    n: int = 0
    unit: str = ""

    @property
    def gating(self) -> bool:
        return self.counts and self.critical

    @property
    def sort_key(self) -> tuple[int, int, str, str]:
        return (0 if self.gating else 1, STATUS_ORDER[self.status], self.scenario, self.name)


def check_figure(rule: MetricRule, figure: Figure | None, scenario: str, counts: bool
                 ) -> Check:
    """Apply `rule` to `figure` (None when the figure was not computed at all)."""
    base = dict(name=rule.name, scenario=scenario, arm=rule.arm, counts=counts,
                critical=rule.critical, threshold=rule.threshold, direction=rule.direction,
                subtract_noise_floor=rule.subtract_noise_floor)
    if figure is None:
        if not rule.required:
            return Check(status=SKIPPED, reason="figure not computed for this run "
                         "(not required)", **base)
        return Check(status=INCONCLUSIVE, reason="required figure missing from the run",
                     **base)
    base.update(value=figure.value, ci_low=figure.ci_low, ci_high=figure.ci_high,
                noise_floor=figure.noise_floor, n=figure.n, unit=figure.unit)
    point = low = high = None
    if figure.value is not None:  # shown even when too few samples to judge
        point, low, high = _compared(rule, figure)
        base.update(compared=point, compared_low=low, compared_high=high)
    if figure.status != "ok" or figure.value is None:
        why = figure.reason or ("no value" if figure.value is None else figure.status)
        status = SKIPPED if not rule.required else INCONCLUSIVE
        return Check(status=status, reason=f"{figure.status}: {why}", **base)
    if point is None:
        return Check(status=INCONCLUSIVE, reason="no noise floor to subtract (run has no "
                     "baseline2 arm, or the figure lacks detail['excess'])", **base)
    if figure.n < rule.min_samples:
        return Check(status=INCONCLUSIVE, reason=f"{figure.n} samples, policy needs "
                     f"{rule.min_samples}", **base)
    return Check(status=_side(rule, low, high), reason=_reason(rule, low, high), **base)


def tied(check: Check) -> Check:
    """`check`, its reason saying "tied" when it was judged against the noise floor and the
    whole excess interval lies within the rule's threshold on both sides: the candidate is
    no better and no worse than a second baseline, to the policy's tolerance. The status
    stays: a tie passes a no-regression rule and fails a rule asking for a gain."""
    low, high, limit = check.compared_low, check.compared_high, check.threshold
    if not check.subtract_noise_floor or check.status not in (PASS, FAIL) or limit is None \
            or low is None or high is None or not -abs(limit) <= low <= high <= abs(limit):
        return check
    return replace(check, reason=f"{check.reason}; {TIED}: the excess over the noise floor "
                   f"lies within ±{abs(limit):g}, no different from a second baseline")


def _compared(rule: MetricRule, figure: Figure
              ) -> tuple[float | None, float | None, float | None]:
    """The point and interval compared to the threshold. A missing end (an order-statistic
    bound beyond the sample, a counter-only figure, an excess without resamples) is
    unbounded on its side: judged as the point, passing got easier as the level rose."""
    if rule.subtract_noise_floor:
        excess = figure.detail.get("excess")
        if excess is None:
            return None, None, None
        low, high = figure.detail.get("excess_ci") or (None, None)
        return float(excess), _end(low, -INF), _end(high, INF)
    return float(figure.value), _end(figure.ci_low, -INF), _end(figure.ci_high, INF)


def _end(x: float | None, missing: float) -> float:
    return missing if x is None else float(x)


def _side(rule: MetricRule, low: float, high: float) -> CheckStatus:
    all_good, any_good = (low >= rule.threshold, high >= rule.threshold)
    if rule.direction == "<=":
        all_good, any_good = (high <= rule.threshold, low <= rule.threshold)
    if all_good:  # the whole interval on the good side (the threshold itself counts as good)
        return PASS
    if not any_good:  # the whole interval on the bad side
        return FAIL
    return INCONCLUSIVE


def _reason(rule: MetricRule, low: float, high: float) -> str:
    what = "excess over noise floor" if rule.subtract_noise_floor else "CI"
    return interval_reason(what, low, high, rule, _side(rule, low, high))


# where an interval lies against a threshold, by the status it gives (the sequential gate's
# undecided straddles, as the fixed gate's inconclusive does)
SIDES = {PASS: "wholly on the good side of", FAIL: "wholly on the bad side of",
         INCONCLUSIVE: "straddles", UNDECIDED: "straddles"}


def interval_reason(what: str, low: float, high: float, rule: MetricRule, status: str) -> str:
    """Why an interval (`what`: CI, confidence sequence, ...) gives `status` under `rule`."""
    return f"{what} [{low:.4g}, {high:.4g}] {SIDES[status]} {rule.direction} {rule.threshold:g}"


def error_rate_check(arm: str, failed: int, total: int, limit: float,
                     confidence: float) -> Check:
    """The fail-closed check of an arm's error rate: a rate above `limit`, or no result at
    all, fails whatever the figures show. It passes only when the exact (Clopper-Pearson)
    one-sided upper bound at `confidence` is within the limit, else it is inconclusive and
    says how many requests would show it: on the point, 0 errors in 48 requests passed a
    1 % limit at a true 5 % with probability 0.085. A zero limit is "no error seen" (no
    bound reaches 0): it passes on 0 errors."""
    base = dict(name=ERROR_RATE, scenario=OVERALL, arm=arm, critical=True, counts=True,
                threshold=limit, direction="<=")
    if not total:
        return Check(status=FAIL, reason="no results recorded for this arm", **base)
    rate = failed / total
    said = f"{failed} of {total} requests failed ({rate:.2%}; limit {limit:.2%}"
    if rate > limit or limit == 0:
        status, why = (FAIL, f"{said})") if rate > limit else (PASS, f"{said}: no error seen)")
        return Check(status=status, value=rate, compared=rate, compared_low=rate,
                     compared_high=rate, n=total, reason=why, **base)
    upper = error_upper_bound(failed, total, confidence)
    if upper <= limit:
        status, why = PASS, f"{said}; {confidence:.0%} upper bound {upper:.2%})"
    else:
        need = requests_to_show(failed, limit, confidence)
        status, why = INCONCLUSIVE, (
            f"{said}; its {confidence:.0%} upper bound {upper:.2%} is above the limit: "
            f"{failed} error{'' if failed == 1 else 's'} of {need} requests or more would "
            "show it)")
    return Check(status=status, value=rate, compared=rate, compared_low=0.0,
                 compared_high=upper, n=total, reason=why, **base)


def complete_check(name: str, manifest: dict[str, Any]) -> Check:
    """The fail-closed check that a run (or its `determinism/` sub-run) completed: an
    interrupted run fails rather than waits, its missing requests are not random."""
    status = manifest.get("status")
    complete = status == COMPLETE
    return Check(name=name, scenario=OVERALL, arm=EVERY_ARM, critical=True, counts=True,
                 status=PASS if complete else FAIL,
                 reason="run marked complete" if complete else
                 f"run status is {status!r}, not 'complete' (interrupted or still running)")


class Reasoned(Protocol):
    """What a reason line names: a check, or a sequential rule's state."""

    name: str
    arm: str
    scenario: str
    reason: str


def names_arm(arm: str) -> bool:
    """Whether a check's label names its arm: not for the candidate (what a check is about
    unless it says otherwise) nor for a run-wide check."""
    return arm not in (CANDIDATE, EVERY_ARM)


def reason_line(reasoned: Reasoned) -> str:
    """A verdict's reason: the figure, its arm unless the candidate (or every arm), its
    scenario unless overall, and why."""
    arm = f" ({reasoned.arm})" if names_arm(reasoned.arm) else ""
    where = "" if reasoned.scenario == OVERALL else f" [{reasoned.scenario}]"
    return f"{reasoned.name}{arm}{where}: {reasoned.reason}"
