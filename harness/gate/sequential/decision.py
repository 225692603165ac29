"""The sequential gate: a policy judged on a run's requests in send order with
anytime-valid intervals (`layergate.exporters.figures.sequential`), so it may be looked at after
every request and stop as soon as the verdict is known.

After each request (in the order they were meant to be sent, counting only a prefix in
which every arm has answered) each gating rule is
- `pass` once its confidence sequence (intersected over the looks so far, from the rule's
  `min_samples` on) lies wholly on the good side of the threshold,
- `fail` once wholly on the bad side, else `undecided`.
The run is decided at the first request after which a gating rule fails (the verdict is
fail whatever the others show, as in the fixed gate) or every gating rule passes; at the
budget, or when the results run out, it is inconclusive. The fail-closed checks stay: an
arm's error rate over the judged requests above the policy's limit fails the verdict, and
decides the run as soon as it is known to be above: the errors exceed limit x budget (no
later request can bring the rate back under), or the rate's own confidence sequence (the
beta-binomial mixture, `layergate.exporters.figures.sequential.binomial`) lies wholly above the
limit, so an arm that fails every request stops the run within its first few. A pass needs
every arm's error rate shown within its limit the same way (its confidence sequence wholly
at or below it; a zero limit: no error so far), as the fixed gate's needs the exact upper
bound. An `interrupted` run fails.

Everything is a function of the send-order prefix, so `until_decided` (the replay's stop
predicate) stops where `decide` on the stored run finds the decision, and both give the
same verdict whatever was still in flight when sending stopped. Of several candidates, each
is judged on the prefix its own arms answered, so one that is decided is sent nothing more
while the others go on, and its verdict stays the one it was decided on.

Timing figures (RER, decode RER, the latency ratios) are widened by the between-process
margin for the policy's `process_spread`, and latency ratios gated against the noise
floor compare the fixed gate's excess B/A - A'/A
(`layergate.exporters.figures.sequential.figures`). When
the judged prefix is saturated (`layergate.exporters.figures.saturation`: an arm queued), its
latency figures are undecided, with the fixed gate's words, so a saturated run is never decided
on latency.

Figures with no per-request path (percentiles, jitter) are skipped when
the rule does not require them and undecided otherwise; the repeat suite's figures are
judged once, by the fixed gate, from the run's `determinism/` sub-run when it has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from layergate.exporters.catalogue import (
    ERROR_RATE,
    FAIL,
    INCONCLUSIVE,
    INTERRUPTED,
    PASS,
    UNDECIDED,
    exit_code,
    judged_on_latency,
)
from layergate.exporters.figures import (
    OVERALL,
    accuracy,
    cache_hit,
    consistency,
    latency,
    rer,
    termination,
)
from layergate.exporters.figures.aligned import align
from layergate.exporters.figures.bootstrap import dense
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.saturation import detect, not_comparable
from layergate.exporters.figures.sequential.binomial import below, binomial_sequence
from layergate.harness.gate.checks import (
    SKIPPED,
    complete_check,
    error_rate_check,
    reason_line,
)
from layergate.harness.gate.policy import Policy, load_policy
from layergate.harness.gate.sequential.rule import RuleInputs, RuleState, Track, state_at, track
from layergate.harness.gate.sequential.send_order import Requests, Source, default_budget, load


@dataclass(frozen=True)
class SequentialDecision:
    verdict: str  # layergate.exporters.catalogue.VERDICTS
    decided: bool  # pass or fail reached before the budget and the results ran out
    n: int  # requests judged: where it was decided, else every request available
    available: int  # requests in send order with every arm answered
    budget: int | None
    figures: tuple[RuleState, ...]
    reasons: tuple[str, ...]
    saturated: dict[str, list[str]] = field(default_factory=dict)  # arm -> its signals, at n
    # of every rule's confidence sequence (two-sided; 1 - alpha/m across m candidates)
    confidence: float = MetricsConfig.confidence

    @property
    def exhausted(self) -> bool:
        """The budget is spent: nothing more may be sent."""
        return self.budget is not None and self.available >= self.budget

    @property
    def exit_code(self) -> int:
        return int(exit_code(self.verdict))

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "decided": self.decided, "n": self.n,
                "available": self.available, "budget": self.budget,
                "confidence": self.confidence,
                "reasons": list(self.reasons), "saturated": self.saturated,
                "figures": [vars(f) for f in self.figures]}


@dataclass(frozen=True)
class _Prefix:
    """The judged requests: the run's send order up to the budget, every arm answered."""

    got: Requests
    order: list[str]
    rows: list
    budget: int | None

    @property
    def available(self) -> int:
        return len(self.order)


@dataclass(frozen=True)
class _Look:
    """Where the run is decided: `at` the index of the deciding request, else the last;
    `any_fail` / `all_pass` after each request, as the saturation leaves them."""

    at: int
    decided: bool
    saturated: dict[str, list[str]]
    any_fail: np.ndarray
    all_pass: np.ndarray


def decide(source: Source, policy: Policy | str | Path | None = None,
           budget: int | None = None,
           confidence: float = MetricsConfig.confidence) -> SequentialDecision:
    """The sequential verdict on a run directory (or `Run`, or rows as stored / as
    `ArmResult`s in send order): see the module docstring. `budget` None: the run's own
    (`default_budget`) when it has one, else every request available. `confidence`: of the
    confidence sequences (lower than the default across several candidates)."""
    policy = policy if isinstance(policy, Policy) else load_policy(policy)
    prefix = _prefix(source, budget)
    if not prefix.order:
        return SequentialDecision(INCONCLUSIVE, False, 0, 0, prefix.budget, (),
                                  ("no request answered by every arm yet",),
                                  confidence=confidence)
    ctx = _context(prefix, policy, confidence)
    tracks = _tracks(policy, ctx)
    errors = _errors(prefix)
    hopeless = _hopeless(errors, policy, ctx.alpha, prefix)
    shown = {arm: error_rate_within(e, policy.error_limit(arm), ctx.alpha)
             for arm, e in errors.items()}
    look = _look(tracks, hopeless, _every(shown, prefix.available), _Saturation(prefix))
    states = tuple(_unsaturated(state_at(t, look.at), look.saturated) for t in tracks)
    verdict, reasons = _verdict(policy, prefix, look, hopeless[look.at], errors, shown,
                                states)
    return SequentialDecision(verdict, look.decided and verdict != INCONCLUSIVE, look.at + 1,
                              prefix.available, prefix.budget, states, tuple(reasons),
                              look.saturated, confidence)


def _prefix(source: Source, budget: int | None) -> _Prefix:
    got = load(source)
    budget = budget if budget is not None else default_budget(got.config)
    order = got.order[:budget] if budget is not None else got.order
    keep = set(order)
    return _Prefix(got, order, [r for r in got.rows if r.request_id in keep], budget)


def _context(prefix: _Prefix, policy: Policy, confidence: float) -> RuleInputs:
    config = MetricsConfig(target_rer=policy.target_rer, tokenizer=prefix.got.tokenizer,
                           text_sample=max(prefix.available, 1), n_resamples=1,
                           confidence=confidence)
    al = align(prefix.rows)
    index = {rid: i for i, rid in enumerate(al.request_ids)}
    perm = np.array([index[rid] for rid in prefix.order])
    cols: dict[str, np.ndarray] = {}
    for calc in (rer, termination, consistency, latency, cache_hit):
        cols |= calc.columns(al, config)
    scores = accuracy.score_outputs(al, prefix.got.references, prefix.got.verdicts)
    cols |= accuracy.columns(al, config, scores)
    cols = {k: dense(v)[perm] for k, v in cols.items()}  # a column may come Sparse
    scenario = np.array([al.scenario_names[s] for s in al.strata[perm]])
    return RuleInputs(prefix.available, prefix.got.determinism, config, al, cols, scenario,
                      policy.process_spread)


def _tracks(policy: Policy, ctx: RuleInputs) -> list[Track]:
    """Every rule's track: overall, then per scenario when the policy gates scenarios."""
    tracks = []
    labels = [OVERALL, *sorted(set(ctx.scenario))] if policy.gate_scenarios else [OVERALL]
    for label in labels:
        rules = policy.rules if label == OVERALL else policy.rules_for_scenario(label)
        mask = None if label == OVERALL else ctx.scenario == label
        counts = label == OVERALL or policy.gate_scenarios
        tracks += [track(rule, label, counts, mask, ctx) for rule in rules]
    return tracks


def _errors(prefix: _Prefix) -> dict[str, np.ndarray]:
    """arm -> its running count of failed requests, in send order."""
    errors = {}
    for arm in sorted({r.arm for r in prefix.rows}):
        failed = {r.request_id for r in prefix.rows if r.arm == arm and not r.ok}
        errors[arm] = np.cumsum([rid in failed for rid in prefix.order])
    return errors


def _hopeless(errors: dict[str, np.ndarray], policy: Policy, alpha: float,
              prefix: _Prefix) -> np.ndarray:
    """After each request: an arm's error rate is known to end above its limit (its
    confidence sequence, or errors beyond the limit times the budget)."""
    hopeless = np.zeros(prefix.available, dtype=bool)
    for arm, e in errors.items():
        limit = policy.error_limit(arm)
        hopeless |= error_rate_above(e, limit, alpha)
        if prefix.budget is not None:
            hopeless |= e > limit * prefix.budget
    return hopeless


def _every(shown: dict[str, np.ndarray], n: int) -> np.ndarray:
    """After each request: every arm's error rate shown within its limit."""
    every = np.ones(n, dtype=bool)
    for within in shown.values():
        every &= within
    return every


def _look(tracks: list[Track], hopeless: np.ndarray, shown: np.ndarray,
          queued: _Saturation) -> _Look:
    """The first request after which a gating rule failed, or every one passed with every
    arm's error rate shown within its limit, judging the latency rules undecided where the
    prefix is saturated; else the last request."""
    any_fail, all_pass = _combined(tracks, hopeless, shown, latency=True)
    any_fail_q, all_pass_q = _combined(tracks, hopeless, shown, latency=False)
    at, decided, sat = hopeless.size - 1, False, None
    for k in np.flatnonzero(any_fail | all_pass):
        sat = queued(int(k))
        if not sat or any_fail_q[k] or all_pass_q[k]:
            at, decided = int(k), True
            break
    if not decided:
        sat = queued(at)
    if sat:
        any_fail, all_pass = any_fail_q, all_pass_q
    return _Look(at, decided, sat or {}, any_fail, all_pass)


def _verdict(policy: Policy, prefix: _Prefix, look: _Look, hopeless: bool,
             errors: dict[str, np.ndarray], shown: dict[str, np.ndarray],
             states: tuple[RuleState, ...]) -> tuple[str, list[str]]:
    """The verdict at the look and its reasons: the rules, then the fail-closed checks
    (each arm's error rate, the run complete) as the fixed gate words them."""
    at, n = look.at, look.at + 1
    verdict = FAIL if look.any_fail[at] else PASS if look.all_pass[at] else INCONCLUSIVE
    reasons: list[str] = []
    if hopeless:
        reasons.append("an arm's error rate is decided above its limit (its confidence "
                       "sequence, or errors beyond the limit times the budget)")
    for arm, e in errors.items():
        check = error_rate_check(arm, int(e[at]), n, policy.error_limit(arm),
                                 policy.error_rate_confidence)
        if check.status == FAIL:
            verdict = FAIL
            reasons.append(reason_line(check))
        elif verdict == INCONCLUSIVE and not shown[arm][at]:
            reasons.append(f"{ERROR_RATE} ({arm}): {int(e[at])} of {n} requests failed; "
                           f"its confidence sequence does not yet lie within the limit "
                           f"{policy.error_limit(arm):.2%}")
    # a run still running is judged as it goes; only an interrupted one has stopped short
    if policy.require_complete and prefix.got.status == INTERRUPTED:
        verdict = FAIL
        reasons.append(reason_line(complete_check("run_complete", {"status": INTERRUPTED})))
    gating = [s for s in states if s.counts]
    reasons += [reason_line(s) for s in gating if s.state == FAIL]
    if verdict == INCONCLUSIVE:
        reasons += [reason_line(s) for s in gating if s.state == UNDECIDED]
        end = "budget spent" if prefix.budget is not None and \
            prefix.available >= prefix.budget else "results ran out"
        reasons.append(f"undecided after {n} requests ({end})")
    return verdict, reasons


def _combined(tracks: list[Track], hopeless: np.ndarray, shown: np.ndarray, latency: bool
              ) -> tuple[np.ndarray, np.ndarray]:
    """(some gating rule failed, every gating rule passed and the error rates are shown
    within their limits) after each request; `latency` False: the latency rules count as
    undecided (a saturated prefix)."""
    any_fail = hopeless.copy()
    all_pass = shown.copy()
    for t in tracks:
        if not t.gating:
            continue
        if t.passed is None:  # skipped, or undecided for good
            all_pass &= t.failed is None
            continue
        if not latency and judged_on_latency(t.rule.name):
            all_pass[:] = False
            continue
        any_fail |= t.failed
        all_pass &= t.passed
    return any_fail, all_pass


class _Saturation:
    """arm -> saturation signals of the first k + 1 requests in send order (computed only
    where the decision needs it: at a look that would decide the run, and at the last)."""

    def __init__(self, prefix: _Prefix) -> None:
        self.order, self.rows, self.got = prefix.order, prefix.rows, prefix.got
        self.limit = prefix.got.in_flight_limit
        self.cache: dict[int, dict[str, list[str]]] = {}

    def __call__(self, k: int) -> dict[str, list[str]]:
        if k not in self.cache:
            prefix = set(self.order[:k + 1])
            al = align([r for r in self.rows if r.request_id in prefix])
            sent = np.array([self.got.sent.get(rid, np.nan) for rid in al.request_ids],
                            dtype=float) if self.got.sent else None
            self.cache[k] = {s.arm: list(s.signals) for s in detect(al, sent, self.limit)
                             if s.saturated}
        return self.cache[k]


def _unsaturated(state: RuleState, queued: dict[str, list[str]]) -> RuleState:
    """A latency figure of a saturated prefix: undecided, in the fixed gate's words."""
    if not queued or not judged_on_latency(state.name) or state.state == SKIPPED:
        return state
    return replace(state, state=UNDECIDED, decided_at=None,
                   reason=f"{not_comparable(queued)} (was: {state.reason})")


def error_rate_above(errors: np.ndarray, limit: float, alpha: float) -> np.ndarray:
    """After each request: whether the error rate's confidence sequence has lain wholly
    above `limit` (once it has, it stays decided: anytime-valid). `errors` is the running
    count of failed requests. The bound is computed only where an error arrives, since the
    lower end rises only then."""
    above = np.zeros(errors.size, dtype=bool)
    steps = np.flatnonzero(np.diff(errors, prepend=0) > 0)
    for k in steps:
        if binomial_sequence(float(errors[k]), float(k + 1), alpha).low > limit:
            above[k:] = True
            break
    return above


def error_rate_within(errors: np.ndarray, limit: float, alpha: float) -> np.ndarray:
    """After each request: whether the error rate's confidence sequence has lain wholly at
    or below `limit` (once it has, it stays decided: anytime-valid), the sequential form of
    the fixed gate's exact upper bound; a zero limit: no error so far. A pass on the point
    would pass a 5 % rate that showed no error yet."""
    if limit == 0:
        return errors == 0
    within = np.zeros(errors.size, dtype=bool)
    for k, e in enumerate(errors):
        if below(float(e), float(k + 1), limit, alpha):
            within[k:] = True
            break
    return within
