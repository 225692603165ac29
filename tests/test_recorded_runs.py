"""Recorded runs read the same, release after release: the figures, the JSON / JUnit /
Markdown reports, the printed lines and the exit code of every command on the runs stored in
tests/fixtures/recorded/ equal the goldens written beside them. A refactor that changes
what a user sees fails here; a deliberate change regenerates the goldens with
`LAYERGATE_REGEN=1 pytest tests/test_recorded_runs.py` and shows the diff in review.

The runs (40 records, echo servers of tests/support/echo_server.py as arms, recorded once):
`same` (a faster candidate answering the same words), `garbled` (a candidate answering
other words), `family` (both as named candidates of one run), and `sweep` (a capacity
sweep, 3 slots against 5)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.harness.cli import main

RECORDED = Path(__file__).parent / "fixtures" / "recorded"
GOLDEN = RECORDED / "golden"
REGEN = os.environ.get("LAYERGATE_REGEN") == "1"

# name -> command line; RUN/<name> is a recorded run, OUT/<file> a report the command writes
CASES = {
    "metrics-same": ["metrics", "RUN/same", "--json", "OUT/figures.json"],
    "metrics-garbled": ["metrics", "RUN/garbled", "--json", "OUT/figures.json"],
    "metrics-family": ["metrics", "RUN/family", "--json", "OUT/figures.json"],
    "gate-same": ["gate", "RUN/same", "--json", "OUT/gate.json", "--junit", "OUT/junit.xml",
                  "--markdown", "OUT/summary.md"],
    "gate-garbled": ["gate", "RUN/garbled", "--json", "OUT/gate.json", "--junit",
                     "OUT/junit.xml", "--markdown", "OUT/summary.md"],
    "gate-garbled-strict": ["gate", "RUN/garbled", "--policy", "strict", "--json",
                            "OUT/gate.json"],
    "gate-family": ["gate", "RUN/family", "--json", "OUT/gate.json", "--junit",
                    "OUT/junit.xml", "--markdown", "OUT/summary.md"],
    "gate-family-all": ["gate", "RUN/family", "--require", "all", "--json", "OUT/gate.json"],
    "gate-sequential": ["gate", "RUN/garbled", "--sequential", "--json", "OUT/gate.json"],
    "gate-sequential-reports": ["gate", "RUN/garbled", "--sequential", "--markdown",
                                "OUT/summary.md"],
    "gate-sweep": ["gate", "RUN/sweep", "--policy", "capacity", "--json", "OUT/gate.json",
                   "--junit", "OUT/junit.xml", "--markdown", "OUT/summary.md"],
    "gate-sweep-default": ["gate", "RUN/sweep", "--json", "OUT/gate.json"],
    "gate-capacity": ["gate", "RUN/family", "--capacity", "fast=RUN/sweep", "--json",
                      "OUT/gate.json"],
    "compare": ["compare", "RUN/same", "RUN/garbled", "--json", "OUT/compare.json"],
}


def _normal(text: str, runs: Path, out: Path) -> str:
    """The text with what differs between machines and checkouts written as placeholders."""
    text = text.replace(str(out), "<OUT>").replace(str(runs), "<RUN>")
    return re.sub(r"[^\s\"']*/exporters/bundled/", "<bundled>/", text)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a copy: a command must not be able to change the recorded runs
    dest = tmp_path_factory.mktemp("recorded") / "runs"
    shutil.copytree(RECORDED, dest, ignore=shutil.ignore_patterns("golden"))
    return dest


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_recorded_run_reads_as_it_did(name: str, runs: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(runs)  # the stored runs name their traffic relative to here
    # the tables' width, whatever the terminal: wide enough that no path wraps
    monkeypatch.setenv("COLUMNS", "250")
    for colour in ("FORCE_COLOR", "CLICOLOR_FORCE", "TTY_COMPATIBLE"):
        monkeypatch.delenv(colour, raising=False)
    args = [a.replace("RUN/", f"{runs}/").replace("OUT/", f"{tmp_path}/")
            for a in CASES[name]]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    got = {"exit": f"{result.exit_code}\n", "output": result.output}
    for f in sorted(tmp_path.iterdir()):
        got[f.name] = f.read_text(encoding="utf-8")
    golden = GOLDEN / name
    if REGEN:
        shutil.rmtree(golden, ignore_errors=True)
        golden.mkdir(parents=True)
        for key, text in got.items():
            (golden / key).write_text(_normal(text, runs, tmp_path), encoding="utf-8")
    expected = {f.name: f.read_text(encoding="utf-8") for f in sorted(golden.iterdir())}
    assert sorted(got) == sorted(expected), f"{name}: other files written"
    for key, text in got.items():
        assert _normal(text, runs, tmp_path) == expected[key], f"{name}: {key} changed"
