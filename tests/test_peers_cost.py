"""The side-by-side's cost section: the cost per request is the slope between a pair of
runs, reported over repeats as a median and a range, and two tools whose ranges overlap are
not ranked; one table per load level, a closed loop of users (each tool asked through its
own concurrency option: the command lines here, no tool installed) or the open loop."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from benchmarks.peers import aiperf, cost, guidellm, inference_perf, schedule, vllm_bench
from benchmarks.peers import layergate as lg_peer
from benchmarks.peers.common import Load, Measured, Truth
from benchmarks.peers.errors import Row, adapter_of
from layergate.harness.cli import replay


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


def _args(**given: object) -> argparse.Namespace:
    return argparse.Namespace(**{"cost_users": "16,64", "cost_flood": "64", "cost_rate": None,
                                 **given})


def test_each_level_is_a_closed_loop_or_the_open_one_and_the_flood_is_instant() -> None:
    assert cost.levels(_args()) == [cost.Level(16, cost.OPEN_RATE, False),
                                    cost.Level(64, cost.OPEN_RATE, True)]
    assert cost.levels(_args()).pop().pacing == ()  # no delay to the first token nor after
    assert "--first-token-delay" in cost.levels(_args())[0].pacing
    assert cost.levels(_args(cost_users="0", cost_rate=8.0)) == [cost.Level(0, 8.0, False)]
    assert cost.levels(_args(cost_users="0,64", cost_flood=""))[1] == cost.Level(64, 64.0,
                                                                                  False)
    for bad in ({"cost_users": "16,16"}, {"cost_users": "-1"}, {"cost_users": "x"},
                {"cost_rate": 8.0}):  # a rate with no open-loop level would go unused
        with pytest.raises(SystemExit):
            cost.levels(_args(**bad))


def test_a_level_says_how_it_was_sent(capsys: pytest.CaptureFixture[str]) -> None:
    x = _cost("x", (1.0, 2.0))
    large = x.pairs[0].large
    noted = dataclasses.replace(large, measured=dataclasses.replace(
        large.measured, notes=("closed loop: 64 users", "not shown")))
    table = cost.Table(cost.Level(64, 64.0, True),
                       (cost.Cost("x", (cost.Pair(x.pairs[0].small, noted),)),))
    cost.print_tables([table, cost.Table(cost.Level(0, 8.0, False), (x,))])
    out = capsys.readouterr().out
    first, second = (line for line in out.splitlines() if line.startswith("client CPU"))
    assert "64 users in a closed loop, an instant server" in first
    assert "at 8/s offered, first token after 100 ms, then one every 20 ms" in second
    assert "x: closed loop: 64 users\n" in out and "not shown" not in out
    assert "x: no note" in out


def _closed(tokenizer: Path, users: int = 16) -> Load:
    return Load(url="http://127.0.0.1:9", model="echo", rate=0.0, requests=40,
                prompt_tokens=32, output_tokens=16, tokenizer=tokenizer, users=users)


def _value(cmd: list[str], flag: str) -> str | None:
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


def test_each_tool_is_asked_for_its_own_closed_loop(tmp_path: Path) -> None:
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")
    closed = _closed(tmp_path / "tok")
    opened = dataclasses.replace(closed, rate=8.0, users=0)

    vllm = vllm_bench.bench_args(closed, Path("/venv"))
    assert (_value(vllm, "--request-rate"), _value(vllm, "--max-concurrency")) == ("inf", "16")
    assert "--burstiness" not in vllm
    assert "--max-concurrency" not in vllm_bench.bench_args(opened, Path("/venv"))
    # its result file records both: a closed loop is said as one, not as a trace's timestamps
    said = vllm_bench.notes({"request_rate": "inf", "max_concurrency": 16}, {})[0]
    assert said.startswith("closed loop: 16 users")
    assert "timestamps" in vllm_bench.notes({"request_rate": "inf", "max_concurrency": None},
                                            {})[0]

    ai = aiperf.command(closed, tmp_path / "a" / "artifacts", Path("/venv"))
    assert _value(ai, "--concurrency") == "16" and _value(ai, "--request-count") == "40"
    # aiperf refuses an arrival pattern without a rate
    assert "--request-rate" not in ai and "--arrival-pattern" not in ai
    ai_open = aiperf.command(opened, tmp_path / "b" / "artifacts", Path("/venv"))
    assert _value(ai_open, "--arrival-pattern") == "poisson" and "--concurrency" not in ai_open
    phase = {"name": "profiling", "type": "concurrency", "concurrency": 16, "requests": 40}
    assert "concurrency of 16 (closed loop" in aiperf._arrivals(
        {"input_config": {"phases": [phase]}})

    assert guidellm.profile(closed) == {"kind": "concurrent", "streams": [16]}
    assert guidellm.profile(opened) == {"kind": "poisson", "rate": [8.0]}

    section, words = inference_perf.load_section(closed)
    assert section == {"type": "concurrent",
                       "stages": [{"num_requests": 40, "concurrency_level": 16}]}
    assert "concurrency_level 16" in words
    assert inference_perf.load_section(opened)[0]["type"] == "poisson"

    def parsed(load: Load) -> dict[str, object]:  # what `layergate replay` makes of them
        args = lg_peer.replay_args(load, tmp_path / "traffic.jsonl", tmp_path / "run")
        assert args[0] == "replay"
        return replay.command.make_context("replay", args[1:]).params

    params = parsed(closed)
    assert (params["users"], params["rate"], params["candidate"]) == (16, None, (closed.url,))
    assert (parsed(opened)["users"], parsed(opened)["rate"]) == (None, 8.0)
