"""The options of `layergate gate --sequential`, apart from the sequential gate itself so
that the command's --help loads nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SequentialConfig:
    """The options of `layergate gate --sequential` (and the budget of `replay
    --until-decided`)."""

    sequential: bool = field(default=False, metadata={
        "help": "Judge the run's requests in send order with anytime-valid intervals "
                "(confidence sequences) and report where the verdict was first known: pass "
                "or fail as soon as every gating figure is decided, inconclusive at the "
                "budget. The verdict `replay --until-decided` stopped on."})
    budget: int | None = field(default=None, metadata={
        "help": "With --sequential: judge at most the first N requests. Default: the "
                "budget the run was replayed --until-decided with, else all.", "min": 1})
