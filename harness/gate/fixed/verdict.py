"""A policy applied to a run's figures: every check, then one verdict.

Any gating failure fails the run; otherwise any gating inconclusive makes it inconclusive;
only then does it pass. The fail-closed checks (run complete, each arm's error rate) are
checks like any other, always critical.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from layergate.exporters.catalogue import (
    CANDIDATE,
    ERROR_RATE,
    FAIL,
    INCONCLUSIVE,
    PASS,
    TTFT_GROWTH,
    judged_on_latency,
)
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.figures.answer_tally import Tally, as_tallies
from layergate.exporters.figures.saturation import LOWER_THE_RATE, not_comparable, saturated_arms
from layergate.exporters.figures.schedule_lag import ScheduleLag, schedule_lag
from layergate.exporters.records import ArmResult
from layergate.harness.gate.checks import (
    INFO,
    Check,
    check_figure,
    complete_check,
    error_rate_check,
    reason_line,
    tied,
)
from layergate.harness.gate.fixed.imported import imported_checks, unpaired_reason
from layergate.harness.gate.fixed.recommendation import recommend
from layergate.harness.gate.fixed.result import GateResult
from layergate.harness.gate.fixed.schedule import schedule_check
from layergate.harness.gate.policy import Policy


def apply_policy(policy: Policy, figures: Sequence[Figure], manifest: dict[str, Any],
                 results: Sequence[ArmResult] | Sequence[Tally], run_dir: Path | None = None,
                 determinism_manifest: dict[str, Any] | None = None,
                 shown: Sequence[ArmResult] | None = None,
                 schedule: ScheduleLag | None = None) -> GateResult:
    """Judge `figures` under `policy`; `manifest` / `results` (`ArmResult`s, or their
    tallies) feed the fail-closed checks (and `determinism_manifest` those of the run's
    `determinism/` sub-run, if any). `shown`: the results the reports show request by
    request (default: `results` when they are `ArmResult`s). `schedule`: the run's send lag
    (default: that of `results` when they are `ArmResult`s; None: not recorded)."""
    counted = as_tallies(results)
    given = [r for r in results if isinstance(r, ArmResult)]
    if shown is None:
        shown = tuple(given)
    if schedule is None and given:
        schedule = schedule_lag(r.send_lag_s for r in given)
    checks = [*_run_checks(policy, manifest, counted, schedule),
              *_figure_checks(policy, figures, counted)]
    if determinism_manifest is not None and policy.require_complete:
        checks.append(complete_check("determinism_complete", determinism_manifest))
    verdict, reasons = verdict_of(checks)
    return GateResult(
        verdict=verdict, reasons=tuple(reasons), checks=tuple(checks), figures=tuple(figures),
        policy=policy, rollout=recommend(verdict, list(figures), policy),
        run_id=str(manifest.get("id") or (run_dir.name if run_dir else "run")),
        manifest=manifest, results=shown, tallies=tuple(counted), schedule=schedule,
        run_dir=run_dir)


def verdict_of(checks: Iterable[Check]) -> tuple[str, list[str]]:
    """The verdict of gating checks, worst first, and the reasons of the checks that gave it."""
    gating = [c for c in checks if c.gating]
    failed = [c for c in gating if c.status == FAIL]
    if failed:
        return FAIL, [reason_line(c) for c in failed]
    unsure = [c for c in gating if c.status == INCONCLUSIVE]
    if unsure:
        return INCONCLUSIVE, [reason_line(c) for c in unsure]
    return PASS, []


def _run_checks(policy: Policy, manifest: dict[str, Any],
                results: Sequence[Tally], lag: ScheduleLag | None) -> list[Check]:
    checks = [schedule_check(policy, lag), *imported_checks(manifest)]
    if policy.require_complete:
        checks.append(complete_check("run_complete", manifest))
    arms = list(manifest.get("arms") or {}) or sorted({r.arm for r in results})
    for arm in arms:
        total = sum(t.count for t in results if t.arm == arm)
        failed = sum(t.count for t in results if t.arm == arm and not t.ok)
        checks.append(error_rate_check(arm, failed, total, policy.error_limit(arm),
                                       policy.error_rate_confidence))
    return checks


def _figure_checks(policy: Policy, figures: Sequence[Figure],
                   results: Sequence[Tally]) -> list[Check]:
    index: dict[tuple[str, str, str], Figure] = {}
    for fig in figures:
        index.setdefault((fig.name, fig.arm, fig.scenario), fig)
    scenarios = sorted(({r.scenario for r in results} | {f.scenario for f in figures}) - {OVERALL})
    queued = saturated_arms(list(figures))
    checks = [Check(name=TTFT_GROWTH, scenario=OVERALL, arm=arm, status=INFO, counts=False,
                    reason=f"saturated: {'; '.join(signals)}; {LOWER_THE_RATE}",
                    value=index[(TTFT_GROWTH, arm, OVERALL)].value)
              for arm, signals in queued.items()]
    for scenario in [OVERALL, *scenarios]:
        rules = policy.rules if scenario == OVERALL else policy.rules_for_scenario(scenario)
        counts = scenario == OVERALL or policy.gate_scenarios
        gated = {(ERROR_RATE, arm) for arm in {r.arm for r in results}}  # run checks
        for rule in rules:
            gated.add((rule.name, rule.arm))
            figure = index.get((rule.name, rule.arm, scenario))
            check = unpaired_reason(check_figure(rule, figure, scenario, counts), figure)
            checks.append(tied(_unsaturated(check, queued)))
        checks += [_info(f) for f in figures
                   if f.scenario == scenario and f.arm == CANDIDATE
                   and (f.name, f.arm) not in gated
                   and not (f.name == TTFT_GROWTH and f.arm in queued)]
    return checks


def _unsaturated(check: Check, queued: dict[str, list[str]]) -> Check:
    """A latency verdict of a run where an arm queued says so instead: the arms' latencies
    measured the queue, so it is neither a pass nor a fail."""
    if not queued or not judged_on_latency(check.name) or check.status not in (PASS, FAIL):
        return check
    return replace(check, status=INCONCLUSIVE,
                   reason=f"{not_comparable(queued)} (was: {check.reason})")


def _info(fig: Figure) -> Check:
    return Check(name=fig.name, scenario=fig.scenario, arm=fig.arm, status=INFO,
                 reason=fig.reason or "reported, not gated", counts=False, value=fig.value,
                 ci_low=fig.ci_low, ci_high=fig.ci_high, noise_floor=fig.noise_floor,
                 n=fig.n, unit=fig.unit)
