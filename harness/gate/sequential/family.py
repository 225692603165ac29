"""The sequential verdicts of a run's candidates as one family (`gate --sequential`): each
candidate's decision in send order, and the run's under `--require`. A single candidate
is a family of one, whose verdict and JSON are its decision's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from layergate.exporters.catalogue import exit_code
from layergate.harness.gate.fixed.family import check_require, combined, decide_each
from layergate.harness.gate.policy import Policy
from layergate.harness.gate.sequential.decision import SequentialDecision
from layergate.harness.gate.sequential.send_order import Source


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
