"""The figures room: every calculator of a figure and the statistics behind its interval
(the modules of this package), and here the computed `Figure` itself, which the calculators
return and the gate, the reports and the exporters consume. `compute.py` computes all the
figures of a run; each calculator takes frozen records (`exporters/records.py`) or their
columns (`columns.py`, `aligned.py`) and returns Figures, and imports nothing of the
harness or the engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from layergate.exporters.catalogue import CANDIDATE, OVERALL, FigureSpec, figure_spec

Status = Literal["ok", "insufficient", "not_computable"]


@dataclass(frozen=True)
class Figure:
    """One metric value for one arm (or arm pair) and one scenario.

    `name` is a catalogued figure (layergate.exporters.catalogue), which gives its unit and meaning.
    `status` says whether `value` can be trusted: "insufficient" when there were fewer
    samples than the minimum, "not_computable" when the definition does not apply
    (e.g. cache-hit delta with a baseline hit rate of 0); `reason` says why in words.
    `noise_floor` is the same figure for baseline2 against baseline, when there is one.
    """

    name: str
    value: float | None
    arm: str = CANDIDATE
    scenario: str = OVERALL
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    status: Status = "ok"
    reason: str = ""
    noise_floor: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        figure_spec(self.name)  # an uncatalogued name is a bug in the calculator

    @property
    def spec(self) -> FigureSpec:
        return figure_spec(self.name)

    @property
    def unit(self) -> str:
        return self.spec.unit
