"""The fixed gate on several candidates of one run, each judged against the same baseline
and noise floor.

Each candidate is judged by the one-candidate gate unchanged, on the run as that candidate
sees it (`harness/gate/candidates.py`). Across the family, the chance of passing any
harmful candidate is held at the policy's alpha by the policy's `multiplicity` method
(Holm's step-down by default), and `--require` turns the candidates' verdicts into the
run's.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from layergate.exporters.catalogue import (
    BONFERRONI,
    CANDIDATE,
    HOLM,
    NO_ADJUSTMENT,
    PASS,
    REQUIRE_ALL,
    REQUIRE_ANY,
    RER,
    did_you_mean,
    exit_code,
)
from layergate.exporters.errors import UsageError
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.figures.config import MetricsConfig
from layergate.harness.gate.candidates import as_candidate, candidates_of, check_require, combined
from layergate.harness.gate.fixed.best import (
    Difference,
    not_worse_than_best,
    paired_differences,
    selected_bounds,
)
from layergate.harness.gate.fixed.evaluation import evaluate_run, metrics_config, run_figures
from layergate.harness.gate.fixed.result import GateResult
from layergate.harness.gate.fixed.saving import Saving, saving_of
from layergate.harness.gate.policy import Policy
from layergate.harness.rundir import Run


class CapacityError(UsageError, ValueError):
    """A capacity sweep given for no candidate of the run (a usage error)."""


def candidate_figures(run: Run, config: MetricsConfig) -> list[Figure]:
    """Every figure of every candidate, on the arm of its name; the reference arms' own
    figures (baseline2's noise floor rows) once."""
    names = candidates_of(run)
    out: list[Figure] = []
    for i, name in enumerate(names):
        for f in run_figures(as_candidate(run, name), config):
            if f.arm == CANDIDATE:
                out.append(dataclasses.replace(f, arm=name))
            elif i == 0:
                out.append(f)
    return out


@dataclass(frozen=True)
class CandidateVerdict:
    name: str
    result: GateResult  # judged with `name` as the arm `candidate`
    confidence: float  # the level its verdict was judged at, after the adjustment
    capacity_ratio: Figure | None = None  # from the candidate's capacity sweep, if given
    # judged at the family-wise level 1 - alpha/m: the intervals shown (Holm's later steps
    # judge at lower levels, whose intervals do not hold for the family together)
    family_wise: GateResult | None = None
    family_wise_confidence: float | None = None
    rer_resamples: object = None  # its overall RER's resamples (numpy), paired with the others'

    @property
    def verdict(self) -> str:
        return self.result.verdict

    @property
    def shown(self) -> GateResult:
        """The result whose intervals the leaderboard shows: the family-wise one."""
        return self.family_wise if self.family_wise is not None else self.result

    @property
    def saving(self) -> Saving:
        """The leaderboard's saving: from its capacity sweep where given, else its RER over
        the whole run (harness/gate/fixed/saving.py), with its family-wise interval."""
        return saving_of(next((f for f in self.shown.figures if f.name == RER
                               and f.arm == CANDIDATE and f.scenario == OVERALL), None),
                         self.capacity_ratio)


@dataclass(frozen=True)
class FamilyResult:
    candidates: tuple[CandidateVerdict, ...]
    multiplicity: str
    alpha: float  # the family-wise error rate the adjustment holds
    require: str

    @classmethod
    def of_one(cls, result: GateResult) -> FamilyResult:
        """A lone verdict (a capacity sweep's) as a family of one, so that every verdict
        reaches the reports the same way; nothing to adjust, at the default confidence."""
        level = MetricsConfig.confidence
        return cls((CandidateVerdict(CANDIDATE, result, level),), NO_ADJUSTMENT,
                   round(1 - level, 12), REQUIRE_ANY)

    @property
    def only(self) -> GateResult | None:
        """The one candidate's result in a family of one (None with several): its reports
        and summary are those of a one-candidate run."""
        return self.candidates[0].result if len(self.candidates) == 1 else None

    @property
    def verdict(self) -> str:
        return combined({c.name: c.verdict for c in self.candidates}, self.require)

    @property
    def exit_code(self) -> int:
        return int(exit_code(self.verdict))

    @property
    def checks(self) -> tuple:
        """Every candidate's checks, each on the arm of the candidate's name."""
        return tuple(dataclasses.replace(check, arm=c.name) if check.arm == CANDIDATE
                     else check for c in self.candidates for check in c.result.checks)

    @functools.cached_property
    def _compared(self) -> tuple[tuple[str, ...], tuple[Difference, ...],
                                 dict[str, tuple[float | None, float | None]]]:
        """(the candidates not worse than the best, every pair's paired difference, each
        candidate's saving interval simultaneous over the family) on the savings' shared
        resamples; without them (a capacity saving, a single candidate) every candidate
        is kept and the family-wise intervals stand."""
        points = {c.name: c.saving.key for c in self.candidates}
        boots = {c.name: np.asarray(c.rer_resamples, dtype=float) for c in self.candidates
                 if c.saving.source == RER and c.rer_resamples is not None}
        if len(boots) != len(self.candidates) or len({len(b) for b in boots.values()}) != 1:
            return tuple(points), (), {}
        return (not_worse_than_best(points, boots, self.alpha),
                tuple(paired_differences(points, boots, self.alpha)),
                selected_bounds(points, boots, self.alpha))

    @property
    def not_worse_than_best(self) -> tuple[str, ...]:
        """The candidates whose saving may be the best at the family-wise level."""
        return self._compared[0]

    @property
    def differences(self) -> tuple[Difference, ...]:
        """Every pair of candidates' paired saving difference, all at 1 - alpha together."""
        return self._compared[1]

    @property
    def recommended(self) -> CandidateVerdict | None:
        """Among the passing candidates not worse than the best, the highest saving; None
        when none passes. (The largest point of several equal candidates reads high: its
        interval is `recommended_interval`, adjusted for the selection.)"""
        best = set(self.not_worse_than_best)
        passing = [c for c in self.candidates if c.verdict == PASS and c.name in best]
        return max(passing, key=lambda c: c.saving.key, default=None)

    @property
    def recommended_interval(self) -> tuple[float | None, float | None] | None:
        """The recommended candidate's saving interval, simultaneous over every candidate
        (so it holds whichever the data selected); without paired resamples, its
        family-wise (Bonferroni-level) interval, which is simultaneous too."""
        best = self.recommended
        if best is None:
            return None
        bounds = self._compared[2]
        if best.name in bounds:
            return bounds[best.name]
        return best.saving.estimate.low, best.saving.estimate.high

    def reasons(self) -> list[str]:
        """Why the run's verdict is what it is, in words."""
        rule = {REQUIRE_ALL: "every candidate must pass", REQUIRE_ANY: "one candidate must "
                "pass"}.get(self.require, f"candidate {self.require!r} must pass")
        lines = [f"--require {self.require}: {rule}"]
        best = self.recommended
        kept = self.not_worse_than_best
        if len(self.candidates) > 1 and len(kept) < len(self.candidates):
            lines.append(f"not worse than the best (at {1 - self.alpha:.0%}): "
                         f"{', '.join(kept)}")
        lines.append(f"recommended: {best.name}" if best is not None else
                     "recommended: none (no candidate passes)")
        return lines


def evaluate_family(run: Run, policy: Policy, require: str = REQUIRE_ANY,
                    config: MetricsConfig | None = None,
                    capacity: dict[str, Figure] | None = None) -> FamilyResult:
    """Every candidate's verdict at its adjusted confidence, and the run's under `require`.
    `capacity`: candidate -> the capacity ratio of its sweep (its saving on the leaderboard).

    The adjustment is `adjusted_verdicts`'s.
    """
    names = candidates_of(run)
    require = check_require(require, names)
    base = config if config is not None else metrics_config(policy, run)
    alpha = round(1 - base.confidence, 12)

    def verdict_at(name: str, level: float, keep: dict | None) -> CandidateVerdict:
        # several candidates: each its own process draw, keyed by its name
        at = dataclasses.replace(base, confidence=level, keep_resamples=keep,
                                 process_key=name if len(names) > 1 else base.process_key)
        return CandidateVerdict(name, evaluate_run(as_candidate(run, name), policy, at), level)

    judged = adjusted_verdicts(names, policy.multiplicity, alpha, verdict_at)
    ratios = capacity or {}
    unknown = sorted(set(ratios) - set(names))
    if unknown:
        raise CapacityError(f"--capacity {unknown[0]!r}: not a candidate of the run "
                            f"({', '.join(names)}){did_you_mean(unknown[0], names)}")
    return FamilyResult(tuple(dataclasses.replace(judged[n], capacity_ratio=ratios.get(n))
                              for n in names), policy.multiplicity, alpha, require)


def adjusted_verdicts(names: tuple[str, ...], multiplicity: str, alpha: float,
                      verdict_at: Callable[[str, float, dict | None], CandidateVerdict]
                      ) -> dict[str, CandidateVerdict]:
    """Each candidate's verdict under `multiplicity`, `verdict_at(name, level, keep)` judging
    one at one level (`keep`: where its figures leave their resamples, on its first
    judgement only). Holm: all m at 1 - alpha/m; while some pass, the rest again at
    1 - alpha/(m - passed); a verdict is the one at its last level. Each verdict carries
    its first judgement, at the family-wise level, as the one its intervals are shown at."""
    judged: dict[str, CandidateVerdict] = {}
    first: dict[str, tuple[CandidateVerdict, object]] = {}
    remaining = list(names)
    while remaining:
        m = 1 if multiplicity not in (HOLM, BONFERRONI) else (
            len(remaining) if multiplicity == HOLM else len(names))
        level = 1 - alpha / m
        for name in remaining:
            kept: dict = {}
            judged[name] = verdict_at(name, level, None if name in first else kept)
            if name not in first:
                first[name] = (judged[name], kept.get((RER, CANDIDATE, OVERALL)))
        passed = [n for n in remaining if judged[n].verdict == PASS]
        if multiplicity != HOLM or not passed or len(passed) == len(remaining):
            break
        remaining = [n for n in remaining if n not in passed]
    return {n: dataclasses.replace(judged[n], family_wise=first[n][0].result,
                                   family_wise_confidence=first[n][0].confidence,
                                   rer_resamples=first[n][1]) for n in names}

