"""Recorded runs read the same, release after release: the figures, the JSON / JUnit /
Markdown reports, the printed lines and the exit code of every command on the runs stored in
tests/fixtures/recorded/ equal the goldens written beside them. A refactor that changes
what a user sees fails here; a deliberate change regenerates the goldens with
`LAYERGATE_REGEN=1 pytest tests/test_recorded_runs.py` and shows the diff in review.

Numbers are compared to their last digits' noise, not byte for byte: the bootstrap sums
float32 columns through BLAS, whose kernels (AVX2 or AVX-512, one core or two) add in
different orders, so a figure's 8th significant digit differs between machines (an
interval end read 0.4926085653 recorded on an AMD EPYC and 0.4926086018 on a Xeon with
AVX-512). Everything else, integers and every word, must match exactly.

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


# a number standing alone (not a piece of a name such as a run id): sign, digits, fraction,
# exponent
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
# float32 sums in another order: ~1e-7 relative, ~1e-7 absolute on a difference of two
# figures (an excess over the noise floor, 2e-6 relative there)
REL, ABS = 1e-5, 1e-6


def _close(a: str, b: str) -> bool:
    """Two printed numbers the same up to float noise: an integer exactly; a decimal within
    REL relatively or ABS, or one unit of its last printed digit where it was printed short
    (a 4-digit figure near a rounding boundary)."""
    if a == b:
        return True
    if not any(c in a + b for c in ".eE"):
        return False
    x, y = float(a), float(b)
    unit = min(_last_unit(a), _last_unit(b))
    return abs(x - y) <= max(REL * max(abs(x), abs(y)), ABS, unit * 1.000001)


def _last_unit(text: str) -> float:
    """One unit of the last digit printed, where fewer than 7 significant digits are."""
    mantissa, _, exponent = text.lower().partition("e")
    digits = mantissa.lstrip("-").replace(".", "").lstrip("0")
    if len(digits) >= 7:
        return 0.0
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def _same(got: str, expected: str) -> bool:
    """The texts equal but for float noise in their numbers (`_close`)."""
    if got == expected:
        return True
    words_got, words_expected = NUMBER.split(got), NUMBER.split(expected)
    numbers_got, numbers_expected = NUMBER.findall(got), NUMBER.findall(expected)
    return (words_got == words_expected and len(numbers_got) == len(numbers_expected)
            and all(map(_close, numbers_got, numbers_expected)))


def test_numbers_compare_to_their_noise_and_words_exactly() -> None:
    assert _same('"ci_high": 0.4926085653438198', '"ci_high": 0.4926086017763276')
    assert _same("[0.4926, 0.5]", "[0.4927, 0.5]")  # a rounding boundary crossed
    assert _same("0.05356254333220643", "0.05356265200714922")  # an excess: a difference
    assert not _same('"ci_high": 0.4926085653438198', '"ci_high": 0.4926185653438198')
    assert not _same("[0.4926, 0.5]", "[0.4928, 0.5]")
    assert not _same("40 requests", "41 requests") and not _same("exit 3", "exit 1")
    assert not _same("run replay-20261203T1", "run replay-20261204T1")
    assert not _same("judged on the point", "judged on its bound")


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
        text = _normal(text, runs, tmp_path)
        if not _same(text, expected[key]):
            assert text == expected[key], f"{name}: {key} changed"  # pytest shows the diff
