"""The decider of `dynamic`: an ordered table of threshold rules on detector features.

The first rule whose conditions all hold gives the layers to skip; when none holds, nothing is
skipped. No learned model and no state: the same features always give the same mask.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from layergate.reference_engine.skip_policies.detector import FEATURES, Features

OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


@dataclass(frozen=True)
class Condition:
    feature: str
    op: str
    value: float

    def __post_init__(self) -> None:
        if self.feature not in FEATURES:
            raise ValueError(f"unknown feature {self.feature!r}; known: {', '.join(FEATURES)}")
        if self.op not in OPS:
            raise ValueError(f"unknown operator {self.op!r}; known: {' '.join(OPS)}")

    def holds(self, features: Features) -> bool:
        return OPS[self.op](getattr(features, self.feature), self.value)


@dataclass(frozen=True)
class Rule:
    """`when` all conditions hold (an empty `when` always holds), skip these layers."""

    name: str
    when: tuple[Condition, ...]
    skip: tuple[int, ...]


@dataclass(frozen=True)
class Decision:
    mask: tuple[bool, ...]  # True = execute
    rule: str | None  # the rule that fired, None when none did

    @property
    def skipped(self) -> tuple[int, ...]:
        return tuple(i for i, run in enumerate(self.mask) if not run)


def decide(features: Features, rules: Sequence[Rule], num_layers: int) -> Decision:
    for rule in rules:
        if all(c.holds(features) for c in rule.when):
            return Decision(mask_without(rule.skip, num_layers), rule.name)
    return Decision((True,) * num_layers, None)


def mask_without(skip: Sequence[int], num_layers: int) -> tuple[bool, ...]:
    """The execute-mask of `num_layers` layers with `skip` removed."""
    bad = [i for i in skip if not 0 <= i < num_layers]
    if bad:
        raise ValueError(f"layer indices {bad} out of range 0..{num_layers - 1}")
    dropped = set(skip)
    return tuple(i not in dropped for i in range(num_layers))
