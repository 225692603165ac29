"""The terminal tables at 80 columns, what a CI log gets (rich sees no terminal there): every
value whole, none cut (`0.5…`) or cropped off the right edge; where the width holds the
whole table, it is printed as it always was (the recorded runs' goldens, at 250 columns,
hold that for every command's output)."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

from layergate.exporters.catalogue import REQUIRE_ANY
from layergate.harness.capacity.verdict import SWEEPS
from layergate.harness.cli import main
from layergate.harness.gate import compare_runs, gate_dir, load_policy, view_config, view_run
from layergate.harness.report import leaderboard
from layergate.harness.report.comparison import print_comparison
from layergate.harness.report.family import leaderboard_table, print_family
from layergate.harness.report.fit import Fit, needed_width
from layergate.harness.report.run_figures import print_figures
from layergate.harness.rundir import load_run
from tests.test_recorded_runs import RECORDED

NARROW = 80


def _render(renderable, width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


def _whole(text: str, values: list[str], width: int = NARROW) -> None:
    """No value cut, no line past the width, and each of `values` on one line of `text`."""
    assert "…" not in text, text
    lines = text.splitlines()
    assert max(cell_len(line.rstrip()) for line in lines) <= width, text
    for value in values:
        assert any(value in line for line in lines), f"{value!r} not whole in:\n{text}"


def _table(rows: int) -> Table:
    table = Table(title="figures", caption="a caption")
    for name in ("figure", "status", "value", "interval", "noise floor", "n"):
        table.add_column(name, no_wrap=True)
    for i in range(rows):
        table.add_row(f"figure_with_a_long_name_{i}", "inconclusive", f"0.{i}4926085",
                      f"[-0.0{i}5999085, 0.0{i}5215]", "" if i % 2 else f"-0.00{i}1596",
                      str(40 + i))
    return table


def test_a_table_wider_than_the_console_is_stacked_whole() -> None:
    table = _table(4)
    assert needed_width(Console(width=NARROW), table) > NARROW
    text = _render(Fit(table, keys=2), NARROW)
    cells = [str(c) for column in table.columns for c in column.cells if c]
    _whole(text, [*cells, "figures", "a caption", "value 0.04926085", "n 43"])
    assert "figure_with_a_long_name_1  inconclusive" in text  # the key cells lead the row
    assert "noise floor -0.0011596" not in text  # an empty cell is left out
    aligned = _render(Fit(table, keys=1, packed=False), NARROW).splitlines()
    assert "    status      inconclusive" in aligned and "    n           40" in aligned


def test_a_table_the_console_holds_is_printed_as_it_is() -> None:
    table = _table(4)
    assert needed_width(Console(width=250), table) <= 250
    assert _render(Fit(table, keys=2), 250) == _render(table, 250)
    assert "┃ figure" in _render(table, 250)


class Recording(Console):
    """A console of `width` columns without a terminal that keeps the tables it prints."""

    def __init__(self, width: int = NARROW) -> None:
        super().__init__(file=io.StringIO(), width=width, color_system=None)
        self.tables: list[Table] = []

    def print(self, *objects, **kwargs) -> None:
        self.tables += [o.table for o in objects if isinstance(o, Fit)]
        super().print(*objects, **kwargs)

    def check(self) -> str:
        """The text printed, once each table's every cell is found whole in it (a cell
        longer than a line: each of its words)."""
        text = self.file.getvalue()
        cells = [self.render_str(c).plain for t in self.tables for column in t.columns
                 for c in column.cells]
        fits = [c for c in cells if cell_len(c) <= self.width - 20]
        _whole(text, [c for c in fits if c not in ("", "—")],
               self.width)
        _whole(text, [w for c in cells if c not in fits for w in c.split()], self.width)
        return text


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    dest = tmp_path / "runs"
    shutil.copytree(RECORDED, dest, ignore=shutil.ignore_patterns("golden"))
    monkeypatch.chdir(dest)  # the stored runs name their traffic relative to here
    return dest


def test_the_leaderboard_and_the_verdict_are_whole_at_80_columns(runs: Path) -> None:
    family = gate_dir(runs / "family", load_policy(None), REQUIRE_ANY, SWEEPS,
                       (f"fast={runs / 'sweep'}",)).family
    assert needed_width(Console(width=NARROW), leaderboard_table(family)) > NARROW
    console = Recording()
    print_family(family, console)
    text = console.check()
    board = leaderboard.rows(family)
    cells = [leaderboard.cell_text(r, n) for r in board for n in leaderboard.columns(board)]
    assert any("(capacity ×" in c for c in cells)  # the widest cell a leaderboard has
    reasons = [r for v in family.candidates for r in v.result.reasons] + family.reasons()
    _whole(text, [*cells, *{w for r in reasons for w in r.split()}, "recommended"])
    for row in board:  # each candidate's row reads as its name and verdict, then its cells
        assert re.search(rf"^{row.name}  {row.verdict}$", text, re.M), text
    assert len(console.tables) > 5  # the leaderboard and each candidate's tables


def test_the_gate_in_a_ci_log_picks_the_narrow_layout(runs: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # no terminal, no width: rich takes 80
    result = CliRunner().invoke(main, ["gate", str(runs / "family")], catch_exceptions=False)
    family = gate_dir(runs / "family", load_policy(None), REQUIRE_ANY, SWEEPS).family
    board = leaderboard.rows(family)
    _whole(result.output, [leaderboard.cell_text(r, n) for r in board
                           for n in leaderboard.columns(board)])


def test_metrics_and_compare_are_whole_at_80_columns(runs: Path) -> None:
    run = load_run(runs / "family")
    console = Recording()
    print_figures(view_run(run, None, view_config(run, None, {})), console)
    assert "95% CI [" in console.check()
    console = Recording()
    print_comparison(compare_runs(load_run(runs / "same"), load_run(runs / "garbled"),
                                  load_policy(None)), console)
    assert "REGRESSION" in console.check()
    assert len(console.tables) == 1
