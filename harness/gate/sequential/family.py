"""The sequential verdicts of a run's candidates as one family (`gate --sequential`): each
candidate's decision in send order, and the run's under `--require`. A single candidate
is a family of one, whose verdict and JSON are its decision's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layergate.exporters.catalogue import CANDIDATE, NO_ADJUSTMENT, candidate_arms, exit_code
from layergate.exporters.figures.config import MetricsConfig
from layergate.harness.gate.candidates import (
    as_candidate,
    candidates_of,
    check_require,
    combined,
    rows_as_candidate,
)
from layergate.harness.gate.policy import Policy
from layergate.harness.gate.sequential.decision import SequentialDecision, decide
from layergate.harness.gate.sequential.send_order import Source
from layergate.harness.rundir import Run, RunDir
from layergate.harness.store.results import StoredResult


@dataclass(frozen=True)
class SequentialFamily:
    decisions: dict[str, SequentialDecision]  # candidate -> its decision, in run order
    require: str

    @property
    def only(self) -> SequentialDecision | None:
        return next(iter(self.decisions.values())) if len(self.decisions) == 1 else None

    @property
    def verdict(self) -> str:
        one = self.only
        return one.verdict if one is not None else combined(
            {n: d.verdict for n, d in self.decisions.items()}, self.require)

    @property
    def exit_code(self) -> int:
        return int(exit_code(self.verdict))

    def to_json(self) -> dict[str, Any]:
        one = self.only
        return one.to_json() if one is not None else {
            "verdict": self.verdict, "require": self.require,
            "candidates": {n: d.to_json() for n, d in self.decisions.items()}}


def decide_family(source: Source, policy: Policy, require: str,
                  budget: int | None = None) -> SequentialFamily:
    """Every candidate's sequential verdict (`decide_each`), with `require` checked against
    the run's candidates."""
    decisions = decide_each(source, policy, budget)
    return SequentialFamily(decisions, check_require(require, tuple(decisions)))


def decide_each(source: Source, policy: Policy, budget: int | None = None
                ) -> dict[str, SequentialDecision]:
    """Each candidate's sequential verdict. Across several, the confidence sequences run at
    1 - alpha/m (Bonferroni: Holm's steps would need each candidate's verdict at several
    levels at every look) unless the policy's multiplicity is none."""
    if isinstance(source, str | Path | RunDir):
        run: Run | None = RunDir(source).load() if not isinstance(source, RunDir) \
            else source.load()
    else:
        run = source if isinstance(source, Run) else None
    rows = list(run.results) if run is not None else [
        r.result if isinstance(r, StoredResult) else r for r in source]
    names = candidates_of(run) if run is not None else candidate_arms(
        dict.fromkeys(r.arm for r in rows))
    if len(names) <= 1:  # one candidate (or no row yet): as it always was, in send order
        return {names[0] if names else CANDIDATE: decide(source, policy, budget)}
    m = 1 if policy.multiplicity == NO_ADJUSTMENT else len(names)
    level = 1 - (1 - MetricsConfig.confidence) / m
    if run is not None:
        return {n: decide(as_candidate(run, n), policy, budget, level) for n in names}
    return {n: decide(rows_as_candidate(rows, n, names), policy, budget, level)
            for n in names}
