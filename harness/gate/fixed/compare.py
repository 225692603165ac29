"""Two runs side by side (`layergate compare RUN_A RUN_B`): the same candidate (or a named arm
in each) judged in each run by the same policy, figure by figure, with the change and
whether it lies outside both runs' intervals. A gated figure that got significantly worse
and is past its threshold in B is a regression.

Each run's figures are paired inside that run (B against its own A), so they compare across
runs whatever the traffic. Only where both runs replayed the same traffic (the traffic
hash) are the two candidates' answers also paired request by request (`outputs_changed`).
"""

from __future__ import annotations

from dataclasses import dataclass

from layergate.exporters.catalogue import CANDIDATE, figure_spec
from layergate.exporters.errors import UsageError
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.records import ArmResult
from layergate.harness.gate.checks import Check
from layergate.harness.gate.fixed.evaluation import evaluate_run
from layergate.harness.gate.fixed.family import as_candidate, candidates_of
from layergate.harness.gate.fixed.result import GateResult
from layergate.harness.gate.fixed.saving import Estimate
from layergate.harness.gate.policy import Policy
from layergate.harness.rundir import Run


class CompareError(UsageError, ValueError):
    """Arms that cannot be compared (a usage error)."""


@dataclass(frozen=True)
class Change:
    name: str
    a: Estimate
    b: Estimate
    gated: bool  # a critical rule of the policy judges it (on its `compared` quantity)
    threshold: str  # the rule, in words ("" when not gated)
    outside: bool  # each run's value lies outside the other run's interval
    worse: bool  # moved to the figure's bad side
    regression: bool  # gated, worse, outside both intervals, and past the threshold in B

    @property
    def delta(self) -> float | None:
        if self.a.value is None or self.b.value is None:
            return None
        return self.b.value - self.a.value


@dataclass(frozen=True)
class Comparison:
    arm_a: str
    arm_b: str
    run_a: GateResult
    run_b: GateResult
    same_traffic: bool
    traffic: tuple[str | None, str | None]  # each run's traffic hash
    changes: tuple[Change, ...]
    outputs_changed: float | None  # share of paired requests whose candidate text changed
    paired: int  # requests answered ok by both candidates (same traffic only)

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.regression]


def pick_arms(run_a: Run, run_b: Run, arm_a: str | None, arm_b: str | None
              ) -> tuple[str, str]:
    """The candidate compared in each run: the one named, else the run's only candidate,
    else the other run's when this run has it too, else the one name both runs have."""
    def one(run: Run, named: str | None, side: str) -> str | None:
        names = candidates_of(run)
        if named is not None and named not in names:
            raise CompareError(f"run {side} ({run.path}) has no candidate {named!r} "
                               f"(its candidates: {', '.join(names)})")
        return named if named is not None else names[0] if len(names) == 1 else None

    a, b = one(run_a, arm_a, "A"), one(run_b, arm_b, "B")
    shared = [n for n in candidates_of(run_a) if n in candidates_of(run_b)]
    a = a if a is not None else b if b in shared else None
    b = b if b is not None else a if a in shared else None
    if a is None or b is None:
        if a is None and b is None and len(shared) == 1:
            return shared[0], shared[0]
        raise CompareError("the runs have several candidates: name the one to compare with "
                           "--arm NAME (or --arm-a and --arm-b)")
    return a, b


def _side(check: Check) -> Estimate:
    if check.subtract_noise_floor:
        return Estimate(check.compared, check.compared_low, check.compared_high)
    return Estimate(check.value, check.ci_low, check.ci_high)


def _outside(a: Estimate, b: Estimate) -> bool:
    def out(x: float | None, low: float | None, high: float | None) -> bool:
        return x is not None and low is not None and high is not None and not low <= x <= high
    return out(a.value, b.low, b.high) and out(b.value, a.low, a.high)


def _past(check: Check) -> bool:
    """B's figure (its compared quantity) is on the bad side of the rule's threshold."""
    x = check.compared
    if x is None or check.threshold is None:
        return False
    return x < check.threshold if check.direction == ">=" else x > check.threshold


def _figure_change(name: str, fa: Figure, fb: Figure) -> Change:
    a, b = Estimate(fa.value, fa.ci_low, fa.ci_high), Estimate(fb.value, fb.ci_low, fb.ci_high)
    return Change(name, a, b, False, "", _outside(a, b), _worse(name, a, b), False)


def _worse(name: str, a: Estimate, b: Estimate) -> bool:
    if a.value is None or b.value is None:
        return False
    higher = figure_spec(name).better == "higher"
    return b.value < a.value if higher else b.value > a.value


def _changes(ra: GateResult, rb: GateResult) -> list[Change]:
    checks_a = {c.name: c for c in ra.overall if c.arm == CANDIDATE and c.gating}
    out = []
    for cb in rb.overall:
        ca = checks_a.get(cb.name)
        if ca is None or cb.arm != CANDIDATE or not cb.gating:
            continue
        a, b = _side(ca), _side(cb)
        outside, worse = _outside(a, b), _worse(cb.name, a, b)
        rule = f"{'excess ' if cb.subtract_noise_floor else ''}{cb.direction} {cb.threshold:g}"
        out.append(Change(cb.name, a, b, True, rule, outside, worse,
                          outside and worse and _past(cb)))
    judged = {c.name for c in out}
    figures_a = {f.name: f for f in ra.figures if f.arm == CANDIDATE and f.scenario == OVERALL}
    for fb in rb.figures:
        fa = figures_a.get(fb.name)
        if fa is not None and fb.arm == CANDIDATE and fb.scenario == OVERALL and \
                fb.name not in judged:
            out.append(_figure_change(fb.name, fa, fb))
    return out


def _outputs_changed(a: list[ArmResult], b: list[ArmResult]) -> tuple[float | None, int]:
    # the answers (text with its tool calls), not the text alone: a changed call is a change
    texts = {r.request_id: r.answer for r in a if r.arm == CANDIDATE and r.ok}
    pairs = [(texts[r.request_id], r.answer) for r in b
             if r.arm == CANDIDATE and r.ok and r.request_id in texts]
    if not pairs:
        return None, 0
    return sum(x != y for x, y in pairs) / len(pairs), len(pairs)


def compare_runs(run_a: Run, run_b: Run, policy: Policy, arm_a: str | None = None,
                 arm_b: str | None = None) -> Comparison:
    a_name, b_name = pick_arms(run_a, run_b, arm_a, arm_b)
    ra = evaluate_run(as_candidate(run_a, a_name), policy)
    rb = evaluate_run(as_candidate(run_b, b_name), policy)
    hashes = ((run_a.manifest.traffic or {}).get("sha256"),
              (run_b.manifest.traffic or {}).get("sha256"))
    same = hashes[0] is not None and hashes[0] == hashes[1]
    changed, paired = _outputs_changed(list(ra.results), list(rb.results)) if same \
        else (None, 0)
    return Comparison(a_name, b_name, ra, rb, same, hashes, tuple(_changes(ra, rb)), changed,
                      paired)
