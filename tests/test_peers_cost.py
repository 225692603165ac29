"""The side-by-side's cost section: the cost per request is the slope between a pair of
runs, reported over repeats as a median and a range, and two tools whose ranges overlap are
not ranked."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.peers import cost, schedule
from benchmarks.peers.common import Measured, Truth
from benchmarks.peers.errors import Row, adapter_of


def _row(tool: str, requests: int, cpu_s: float) -> Row:
    measured = Measured(tool, {}, {}, {}, requests, cpu_s, 1.0, Path("."))
    return Row(tool, 64.0, measured, Truth({}, {}, {}, requests, ()))


def _cost(tool: str, *pairs: tuple[float, float]) -> cost.Cost:
    """A tool whose runs of 100 and 500 requests took these CPU seconds."""
    return cost.Cost(tool, tuple(cost.Pair(_row(tool, 100, a), _row(tool, 500, b))
                                 for a, b in pairs))


def test_the_slope_and_the_fixed_part_come_from_the_pair() -> None:
    pair = cost.Pair(_row("x", 100, 2.5), _row("x", 500, 4.5))
    assert pair.slope_ms == pytest.approx(5.0)  # 2 s over 400 more requests
    assert pair.fixed_s == pytest.approx(2.0)


def test_overlapping_ranges_are_not_ranked(capsys: pytest.CaptureFixture[str]) -> None:
    cheap = _cost("cheap", (1.0, 1.4), (1.0, 1.5), (1.0, 1.45))  # 1.00-1.25 ms
    close = _cost("close", (1.0, 1.48), (1.0, 1.6), (1.0, 1.55))  # 1.20-1.50 ms
    dear = _cost("dear", (1.0, 3.0), (1.0, 3.2), (1.0, 3.1))  # 5.0-5.5 ms
    cost.print_table([dear, close, cheap])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert [line.split(" | ")[0] for line in lines[2:5]] == ["cheap", "close", "dear"]
    assert "cheap | 1.12 [1.00, 1.25]" in out
    assert "cheap and close: their ranges overlap" in out
    assert "close and dear" not in out


def test_a_checkout_is_measured_as_layergate(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no layergate checkout"):
        adapter_of(f"layergate@{tmp_path}")
    root = Path(__file__).resolve().parents[1]
    adapter, venv = adapter_of(f"layergate@{root}")
    assert venv is None and adapter.TOOL == f"layergate@{root}"
    assert schedule.arms_of(f"layergate@{root}") == 2 and schedule.arms_of("aiperf") == 1


def test_each_climb_gives_its_top_and_the_median(capsys: pytest.CaptureFixture[str]) -> None:
    def climb(*rates_kept: tuple[float, bool]) -> list[schedule.Step]:
        return [schedule.Step("layergate", r, 10, 10, r, 1.0, kept) for r, kept in rates_kept]

    schedule.print_limits({"layergate": [climb((100, True), (200, False)),
                                         climb((100, True), (200, True), (400, False)),
                                         climb((100, False))]})
    out = capsys.readouterr().out
    assert "highest sustained per climb 100, 200, 0/s; median 100/s (200 arm-requests/s)" \
        in out
