"""Every arm, verdict state, figure name, watch transition and run status has one owner,
the catalogue: code in harness/ and exporters/ imports the word instead of writing it
(docstrings, and the text inside an f-string, may say it)."""

from __future__ import annotations

import ast
from pathlib import Path

from layergate.exporters.catalogue import (
    ADVANCE,
    ARMS,
    EVERY_ARM,
    FIGURES,
    HOLD,
    OVERALL,
    RECORDED,
    ROLLBACK,
    RUN_STATUSES,
    VERDICT_STATES,
)

ROOT = Path(__file__).resolve().parents[1]
OWNER = Path("exporters/catalogue.py")
WORDS = {*ARMS, RECORDED, EVERY_ARM, OVERALL, *VERDICT_STATES, *FIGURES, ADVANCE, ROLLBACK,
         HOLD, *RUN_STATUSES}
# the same spelling in another sense, each owned where it is written
ALLOWED = {
    ("harness/cli/__init__.py", "capacity"): "the command's name and module",
    ("harness/cli/capacity.py", "capacity"): "the command's name",
    ("harness/sweepdir.py", "capacity"): "the run kind in a sweep's manifest",
    ("harness/capacity/report.py", "capacity"): "a field of capacity.json (docs/FORMATS.md)",
    ("harness/capacity/report.py", "error_rate"): "a step's field in capacity.json",
    ("harness/capacity/report.py", "goodput"): "a step's field in capacity.json (requests/s, "
                                               "not the share the figure is)",
    ("harness/report/capacity_plots.py", "capacity"): "the field read from capacity.json",
    ("harness/report/capacity_plots.py", "goodput"): "a step's field plotted",
    ("harness/report/capacity_plots.py", "ttft_p50"): "a step's field plotted",
    ("harness/report/capacity_plots.py", "ttft_p90"): "a step's field plotted",
    ("harness/report/capacity_plots.py", "tpot_p50"): "a step's field plotted",
    ("harness/report/capacity_plots.py", "tpot_p90"): "a step's field plotted",
    ("exporters/capacity_export.py", "error_rate"): "a step's exported series",
    ("harness/cli/demo.py", "hold"): "the demo's --hold option (keep the stack up)",
    ("harness/watch/flagger.py", "rollback"): "the name of Flagger's rollback webhook",
    ("harness/watch/policy.py", "inconclusive"): "the watch policy's key saying what an "
                                                 "inconclusive stage does",
}


def _docstrings(tree: ast.AST) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def literals(source: str) -> list[tuple[int, str]]:
    """(line, word) of each string constant in `source` that is a catalogued word, outside
    docstrings and f-string text."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            skip |= {id(part) for part in node.values if isinstance(part, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in WORDS and id(node) not in skip]


def _found() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted([*ROOT.glob("harness/**/*.py"), *ROOT.glob("exporters/**/*.py")]):
        rel = path.relative_to(ROOT)
        if rel == OWNER:
            continue
        for line, word in literals(path.read_text(encoding="utf-8")):
            found.setdefault((rel.as_posix(), word), []).append(line)
    return found


def test_no_catalogued_word_is_written_outside_the_catalogue():
    found = _found()
    stray = [f"{path}:{lines[0]}: {word!r}" for (path, word), lines in sorted(found.items())
             if (path, word) not in ALLOWED]
    assert not stray, "import these words from layergate.exporters.catalogue:\n" + "\n".join(stray)


def test_every_allowed_literal_is_still_written():
    stale = sorted(set(ALLOWED) - set(_found()))
    assert not stale, f"allowed but no longer written, drop from ALLOWED: {stale}"


def test_the_scan_sees_code_and_not_prose():
    source = ('"""candidate and pass in a docstring."""\n'
              'x = f"the {y} candidate"\n'
              'ARM = "candidate"\n'
              'z = {"pass": 1}\n'
              'done = status == "complete"\n')
    assert literals(source) == [(3, "candidate"), (4, "pass"), (5, "complete")]


def test_one_rollout_ladder_for_the_gate_and_the_watch():
    from layergate.exporters.catalogue import STAGES, stage_for
    from layergate.harness.watch.stages import StagePlan

    percents = [s.percent for s in STAGES]
    assert percents == sorted(percents) and STAGES[-1].percent == 100
    # the gate's recommendation climbs the same rungs the watch walks by default
    plan = StagePlan()
    assert plan.stages == tuple(s.percent for s in STAGES if s.percent > 0)
    reached = {stage_for(x) for x in (-1, 0.1, 0.3, 0.9)}
    assert reached == {"internal", "vip", "public_5pct", "full"}


def test_the_verdict_types_spell_the_catalogued_states():
    from typing import get_args

    from layergate.exporters.catalogue import (
        NO_DATA,
        PENDING,
        VERDICTS,
        Transit,
        Verdict,
        WatchVerdict,
    )

    assert get_args(Verdict) == VERDICTS
    assert set(get_args(WatchVerdict)) == {*VERDICTS, PENDING, NO_DATA}
    assert set(get_args(Transit)) == {ADVANCE, ROLLBACK}
    assert set(get_args(WatchVerdict)) | set(get_args(Verdict)) <= set(VERDICT_STATES)


def test_the_status_type_spells_the_catalogued_run_statuses():
    from typing import get_args

    from layergate.exporters.catalogue import RunStatus

    assert get_args(RunStatus) == RUN_STATUSES
