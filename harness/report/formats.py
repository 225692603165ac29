"""Every command's report formats, one registry per kind of result
(harness/report/registry.py): the gate's family (`gate`, `demo`), the gate's sequential
family, a comparison of two runs, a run's figures (`metrics`) and a watch's final state.

The gate's writers take a family: a family of one (a single candidate, a capacity sweep)
is written as its candidate's own report, as a one-candidate run always was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from layergate.exporters.atomic import write_json_atomic
from layergate.harness.gate import Comparison, FamilyResult, GateResult, RunView
from layergate.harness.report import family, html, json_report, junit, markdown
from layergate.harness.report.comparison import write_comparison_json
from layergate.harness.report.registry import Reports
from layergate.harness.report.run_figures import write_figures_json


class HasJson(Protocol):
    def to_json(self) -> dict[str, Any]: ...


GATE: Reports[FamilyResult] = Reports("gate")
SEQUENTIAL: Reports[HasJson] = Reports("sequential gate")
COMPARISON: Reports[Comparison] = Reports("comparison")
FIGURES: Reports[RunView] = Reports("figures")
WATCH: Reports[HasJson] = Reports("watch")  # its state: harness/watch/loop.py WatchOutcome


def _by_size(one: Callable[[GateResult, Path], Path],
             several: Callable[[FamilyResult, Path], Path]) -> Callable[[FamilyResult, Path],
                                                                        Path]:
    def write(result: FamilyResult, path: Path) -> Path:
        only = result.only
        return one(only, path) if only is not None else several(result, path)
    return write


GATE.register("json")(_by_size(json_report.write_json, family.write_family_json))
GATE.register("junit")(_by_size(junit.write_junit, family.write_family_junit))
GATE.register("markdown")(_by_size(markdown.write_markdown, family.write_family_markdown))
GATE.register("html")(_by_size(html.write_html, family.write_family_html))
COMPARISON.register("json")(write_comparison_json)
FIGURES.register("json")(write_figures_json)


@SEQUENTIAL.register("json")
@WATCH.register("json")
def write_state_json(result: HasJson, path: Path) -> Path:
    """What `to_json` says, indented."""
    return write_json_atomic(path, result.to_json())

