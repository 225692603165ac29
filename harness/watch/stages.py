"""The staged-rollout decision, one window at a time.

Each stage collects windows with data. After every window each policy figure is checked as
the gate checks a figure (`layergate.harness.gate.checks.check_figure`), on its
anytime-valid interval over the stage's windows:

- any critical figure decided bad: roll back, at once;
- every critical figure decided good, after the stage's `min_windows`: advance (past the
  last stage below 100 %: the rollout passes);
- `max_windows` with data and still undecided: inconclusive;
- a window without data (Prometheus unreachable, a selector that matches nothing, an arm
  without traffic) adds nothing; `no_data_windows` of them in a row end the watch in the
  no-data state. Before the candidate has first served traffic (a controller that has not
  shifted any yet, canary pods still starting), the candidate's own missing data does not
  count toward that: such windows end the watch only after `max_windows` of them. None of
  these is ever a pass.
- a window served below the stage's weight (the controller has not stepped there yet: a
  suspended Flagger, a lost grant, a hook that has not moved the traffic) adds nothing
  either and ends nothing: a stage is judged only on windows served at its weight or above
  (`StagePlan.nearest` names the stage a weight reading is at). The watch holds, and says
  so, until the controller steps.

An inconclusive stage holds (the verdict is `inconclusive`, no transition), or, with the
policy's `inconclusive: rollback`, is also a rollback transition.

A candidate can also turn bad in the middle of a stage; an interval over all the stage's
windows then averages the good windows in and is slow to move. So besides the interval over
the whole stage, one restarts every `restart` windows (the j-th over windows j * restart
onward), and any of them decided bad rolls back; advancing needs the whole stage's.

Error budget: with a between-process term (the policy's `process_spread` tau > 0 and a
latency figure among the critical ones), half the policy's alpha goes to it: the arms'
processes differ by u_B - u_A for the whole rollout, one draw shared by every stage, figure
and look, so one margin, z(1 - alpha / 4) sqrt(2) tau in log ratio, widens every latency
interval (`canary.process_margin`). The rest (all of alpha without the term) is split over
the watched stages and the critical figures (a union bound); within one (stage, figure),
half goes to the whole-stage interval and half is spread over the restarts (the j-th gets
6 / (pi^2 j^2) of it, which sums to 1). Every interval holds at every look, so the chance
of rolling back a candidate whose critical figures all lie within their thresholds is at
most alpha over the whole rollout, provided the windows of a stage are alike (no drift of
the true ratio within a stage) and the arms keep their processes through the rollout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from layergate.exporters.catalogue import (
    ADVANCE,
    FAIL,
    INCONCLUSIVE,
    LIVE_FIGURES,
    NO_DATA,
    PASS,
    PENDING,
    ROLLBACK,
    WATCHING,
    ExitCode,
    Transit,
    WatchVerdict,
    exit_code,
)
from layergate.exporters.errors import UsageError
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.figures.canary import (
    TIMED,
    Evidence,
    Window,
    available,
    evidence,
    process_margin,
)
from layergate.harness.gate import SKIPPED, Check, MetricRule, check_figure
from layergate.harness.policy_file import PolicyError
from layergate.harness.watch.config import WatchConfig
from layergate.harness.watch.policy import WatchPolicy

TERMINAL: tuple[WatchVerdict, ...] = (PASS, FAIL, INCONCLUSIVE, NO_DATA)
NO_DATA_EXIT = ExitCode.INFRASTRUCTURE  # nothing could be measured
FULL = 100.0
MIN_N_OPT = 4  # the t-mixture cannot exclude anything before 4 windows at these alphas
MAX_N_OPT = 10  # past this, a tight boundary only delays the early decisions that matter
PROCESS_SHARE = 0.5  # of the policy's alpha, for the between-process term (when it has one)


class StagePlanError(UsageError, ValueError):
    """Stages or window counts that make no rollout."""


@dataclass(frozen=True)
class StagePlan:
    stages: tuple[float, ...] = WatchConfig.stages  # percent of traffic on the candidate
    min_windows: int = WatchConfig.min_windows
    max_windows: int = WatchConfig.max_windows
    no_data_windows: int = WatchConfig.no_data_windows

    def __post_init__(self) -> None:
        s = self.stages
        if not s or any(not 0 < x <= FULL for x in s) or list(s) != sorted(set(s)):
            raise StagePlanError(f"stages must increase within (0, 100], got {list(s)}")
        if not self.analysed:
            raise StagePlanError("stages: at least one stage below 100 % (at 100 % no baseline "
                             "serves beside the candidate)")
        if not 1 <= self.min_windows <= self.max_windows:
            raise StagePlanError(f"need 1 <= min windows <= max windows, got {self.min_windows}"
                             f" and {self.max_windows}")
        if self.no_data_windows < 1:
            raise StagePlanError(f"no-data windows must be >= 1, got {self.no_data_windows}")

    @property
    def analysed(self) -> tuple[float, ...]:
        """The stages watched; reaching 100 % is the promotion, with nothing beside it."""
        return tuple(x for x in self.stages if x < FULL)

    def nearest(self, weight: float) -> float:
        """The stage a weight reading is at: 0 only when the candidate has no traffic at
        all, else the nearest stage on a log scale. A controller's exported weight is
        exact; an observed share is not (a new canary's first counts are missed by its
        first scrape, so 5 % may read 2.5 %), nor is Argo's replica ratio (1 % of 10
        replicas: 1 pod of 11, 9.1 %). Both the grants and the windows a stage counts use
        this."""
        if weight <= 0:
            return 0.0
        return min(self.analysed, key=lambda s: abs(math.log(weight / s)))

    def after(self, index: int) -> float:
        return self.analysed[index + 1] if index + 1 < len(self.analysed) else FULL


@dataclass(frozen=True)
class StageFigure:
    """One policy figure judged over the windows of a stage (its gate `Check`)."""

    check: Check
    last: float | None = None  # the last window's own value, on the figure's scale
    history: tuple[float | None, ...] = ()  # every window of the stage, likewise


@dataclass(frozen=True)
class Transition:
    """What a hook is told: the stage judged, the traffic share to set next (0 on a
    rollback), and why."""

    decision: Transit
    stage: float
    next_stage: float
    reasons: tuple[str, ...]
    verdict: WatchVerdict | None = None  # set when it ends the watch otherwise than it implies

    @property
    def key(self) -> str:
        """Names the transition in the state file: one hook run per key."""
        return f"{self.decision}:{self.stage:g}->{self.next_stage:g}"

    @property
    def final(self) -> bool:
        return self.decision == ADVANCE and self.next_stage >= FULL

    @property
    def ends(self) -> WatchVerdict | None:
        """The verdict the watch ends with after this transition (None: it goes on)."""
        if self.verdict is not None:
            return self.verdict
        return FAIL if self.decision == ROLLBACK else PASS if self.final else None


@dataclass(frozen=True)
class WatchStatus:
    verdict: WatchVerdict
    stage: float
    stage_index: int
    windows: int = 0
    missing: int = 0
    no_data_reason: str | None = None
    figures: tuple[StageFigure, ...] = ()
    reasons: tuple[str, ...] = ()
    advances: int = 0
    window_end: float | None = None
    history: tuple[float, ...] = field(default=())  # the stages passed, in order
    waiting: int = 0  # windows without the candidate's data before it first served
    held: int = 0  # windows in a row served below the stage's weight (not counted)
    held_at: float | None = None  # the stage the last such window was served at

    @property
    def state(self) -> str:
        """watching / no_data while pending, else the verdict."""
        if self.verdict != PENDING:
            return self.verdict
        return NO_DATA if self.missing else WATCHING

    @property
    def exit_code(self) -> int:
        """The gate's codes; a watch stopped before any verdict is inconclusive (3), or
        without data (4) when its last window had none."""
        if self.verdict == NO_DATA or (self.verdict == PENDING and self.missing):
            return NO_DATA_EXIT
        return exit_code(INCONCLUSIVE if self.verdict == PENDING else self.verdict)


class StageMachine:
    """Feeds windows (or their absence) through the stages; see the module docstring."""

    def __init__(self, policy: WatchPolicy, plan: StagePlan, roles: set[str],
                 engine: str = "") -> None:
        self.policy, self.plan = policy, plan
        self.unavailable: dict[str, str] = {}
        for rule in policy.rules:
            figure = LIVE_FIGURES[rule.name]
            if not available(figure, roles):
                why = (f"engine {engine or '?'} exposes no {' / '.join(figure.roles)} metric "
                       "(scenarios/watch/metric-names.yaml)")
                if rule.critical and rule.required:
                    raise PolicyError(f"{policy.path or '<policy>'}: metrics.{rule.name}: "
                                      f"critical and required, but {why}; set required: false "
                                      "or use a mapping that names the metric")
                self.unavailable[rule.name] = why
        gating = [r for r in policy.gating if r.name not in self.unavailable]
        timed = any(LIVE_FIGURES[r.name].scale in TIMED for r in gating)
        share = PROCESS_SHARE if policy.process_spread > 0 and timed else 0.0
        # one margin for the whole rollout: the same two processes behind every window
        self.margin = process_margin(policy.process_spread, policy.alpha * share)
        # per (stage, figure); half for the whole-stage interval, half for the restarts
        self.alpha = policy.alpha * (1 - share) / (len(plan.analysed) * max(1, len(gating)))
        # the interval is tightest where decisions are due: at the stage's minimum windows
        self.n_opt = min(max(MIN_N_OPT, plan.min_windows), MAX_N_OPT)
        self.restart = self.n_opt
        self._windows: list[Window] = []
        self.served = False  # a window with the candidate's data seen yet
        self.inconclusive_rollback = policy.inconclusive == ROLLBACK
        self.status = WatchStatus(PENDING, plan.analysed[0], 0)

    def step(self, window: Window | None, no_data_reason: str | None = None,
             candidate: bool = False, served_at: float | None = None
             ) -> tuple[WatchStatus, Transition | None]:
        """One window: `window` with data, or None with the reason there was none
        (`candidate`: it was the candidate's data that was missing). `served_at`: the stage
        the window was served at (None: not known, it counts)."""
        if self.status.verdict != PENDING:
            return self.status, None
        if window is None:
            return self._no_data(no_data_reason or "no data", candidate), None
        self.served = True
        if served_at is not None and served_at < self.status.stage:
            self.status = replace(self.status, missing=0, no_data_reason=None,
                                  held=self.status.held + 1, held_at=served_at,
                                  window_end=window.end)
            return self.status, None
        self._windows.append(window)
        figures = tuple(self._stage_figure(rule) for rule in self.policy.rules)
        base = replace(self.status, windows=len(self._windows), missing=0, no_data_reason=None,
                       figures=figures, window_end=window.end, held=0, held_at=None)
        gating = [f.check for f in figures if f.check.critical]
        bad = [c for c in gating if c.status == FAIL]
        if bad:
            return self._rollback(base, bad)
        decided = [c for c in gating if c.status == PASS]
        undecided = [c for c in gating if c.status not in (PASS, SKIPPED)]
        if len(self._windows) >= self.plan.min_windows and decided and not undecided:
            return self._advance(base, decided)
        if len(self._windows) >= self.plan.max_windows:
            why = undecided or [c for c in gating if c.status == SKIPPED]
            self.status = replace(base, verdict=INCONCLUSIVE, reasons=(
                f"stage {_pct(base.stage)}: {len(self._windows)} windows and still undecided",
                *_words(why)))
            if self.inconclusive_rollback:
                return self.status, Transition(ROLLBACK, base.stage, 0.0,
                                               self.status.reasons, INCONCLUSIVE)
            return self.status, None
        self.status = replace(base, reasons=())
        return self.status, None

    def _stage_figure(self, rule: MetricRule) -> StageFigure:
        if rule.name in self.unavailable:
            return StageFigure(check_figure(rule, Figure(
                rule.name, None, status="not_computable", reason=self.unavailable[rule.name]),
                OVERALL, counts=True))
        ev = evidence(rule.name, self._windows, self.alpha / 2, self.n_opt, self.margin)
        whole = StageFigure(_checked(rule, ev), ev.last, ev.history)
        if whole.check.status == FAIL:
            return whole
        j = 1
        while len(self._windows) - j * self.restart >= MIN_N_OPT:
            start = j * self.restart
            alpha = self.alpha / 2 * 6 / (math.pi ** 2 * j * j)
            recent = evidence(rule.name, self._windows[start:], alpha, self.n_opt, self.margin)
            check = _checked(rule, recent)
            if check.status == FAIL:
                return StageFigure(replace(check, reason=f"over windows {start + 1}-"
                                           f"{len(self._windows)}: {check.reason}"), ev.last,
                                   ev.history)
            j += 1
        return whole

    def _no_data(self, reason: str, candidate: bool) -> WatchStatus:
        if candidate and not self.served:
            waiting = self.status.waiting + 1
            status = replace(self.status, waiting=waiting, no_data_reason=reason)
            if waiting >= self.plan.max_windows:
                status = replace(status, verdict=NO_DATA, reasons=(
                    f"the candidate served no traffic in {waiting} windows: {reason}",))
            self.status = status
            return status
        missing = self.status.missing + 1
        status = replace(self.status, missing=missing, no_data_reason=reason)
        if missing >= self.plan.no_data_windows:
            status = replace(status, verdict=NO_DATA, reasons=(
                f"no data for {missing} windows in a row at stage {_pct(status.stage)}: "
                f"{reason}",))
        self.status = status
        return status

    def _rollback(self, base: WatchStatus, bad: list[Check]
                  ) -> tuple[WatchStatus, Transition]:
        reasons = tuple(_words(bad))
        self.status = replace(base, verdict=FAIL, reasons=reasons)
        return self.status, Transition(ROLLBACK, base.stage, 0.0, reasons)

    def _advance(self, base: WatchStatus, good: list[Check]
                 ) -> tuple[WatchStatus, Transition]:
        reasons = tuple(_words(good))
        nxt = self.plan.after(base.stage_index)
        transition = Transition(ADVANCE, base.stage, nxt, reasons)
        self._windows = []
        history = (*base.history, base.stage)
        if transition.final:
            self.status = replace(base, verdict=PASS, reasons=reasons, history=history,
                                  advances=base.advances + 1)
        else:
            self.status = replace(base, stage=nxt, stage_index=base.stage_index + 1,
                                  windows=0, advances=base.advances + 1, reasons=reasons,
                                  history=history)
        return self.status, transition


def _checked(rule: MetricRule, ev: Evidence) -> Check:
    """The gate's judgement, worded for a confidence sequence rather than a CI."""
    check = check_figure(rule, _as_figure(ev), OVERALL, counts=True)
    return replace(check, reason=check.reason.replace("CI [", "interval [", 1))


def _as_figure(ev: Evidence) -> Figure:
    if ev.n == 0 or ev.estimate is None:
        return Figure(ev.name, None, status="insufficient",
                      reason="no window with data for it yet")
    if ev.low is None or ev.high is None:
        return Figure(ev.name, ev.estimate, n=ev.n, status="insufficient",
                      reason=f"interval still unbounded after {ev.n} windows")
    return Figure(ev.name, ev.estimate, ci_low=ev.low, ci_high=ev.high, n=ev.n)


def _words(checks: list[Check]) -> list[str]:
    return [f"{c.name}: {c.reason}" for c in checks]


def _pct(stage: float) -> str:
    return f"{stage:g} %"
