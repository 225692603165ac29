"""AIPerf's adapter (benchmarks/peers/aiperf.py) read against what AIPerf 0.13.0 really wrote:
tests/fixtures/peers/aiperf/ holds one run's own files (30 streamed completions, Poisson at
4/s, against the echo server: first token after 100 ms, then one every 20 ms). The figures
below were read from that profile_export_aiperf.json by hand. No aiperf install needed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.peers import aiperf
from benchmarks.peers.common import Load, OutputError

RECORDED = Path(__file__).parent / "fixtures" / "peers" / "aiperf"
SUMMARY = RECORDED / "profile_export_aiperf.json"


def _ms(*values: float) -> dict[int, float]:
    return {q: pytest.approx(v / 1000, rel=1e-12) for q, v in zip((50, 90, 99), values,
                                                                  strict=True)}


def test_the_recorded_summary_is_read_as_written() -> None:
    got = aiperf.read_summary(SUMMARY, cpu_s=4.9, wall_s=10.4)
    # "time_to_first_token", "inter_token_latency", "request_latency": unit "ms"
    assert got.ttft == _ms(102.8171735, 105.61127309999999, 106.76483157)
    assert got.itl == _ms(21.468160966666666, 21.93242276, 22.203886650666664)
    assert got.e2e == _ms(424.642685, 431.6530909, 437.18829221)
    assert got.ok == 30  # "request_count": {"avg": 30.0}
    assert (got.tool, got.cpu_s, got.wall_s, got.raw) == ("aiperf", 4.9, 10.4, SUMMARY)
    assert "arrivals: poisson at 4/s, 30 requests (aiperf's input_config)" in got.notes
    assert "aiperf counted 0 failed requests" in got.notes
    assert aiperf.offered_rate(SUMMARY) == 4.0


def test_the_recorded_run_agrees_with_the_echo_servers_pacing() -> None:
    got = aiperf.read_summary(SUMMARY)
    assert 0.1 <= got.ttft[50] < 0.12 and 0.02 <= got.itl[50] < 0.025
    assert got.e2e[50] == pytest.approx(got.ttft[50] + 15 * got.itl[50], abs=0.01)


def test_the_recorded_sweep_is_read_per_rate() -> None:
    # `--request-rate 2,8 --request-count 10`: one rate_<R>/ directory per variation
    got = aiperf.read_sweep(RECORDED / "sweep", cpu_s=12.4, wall_s=22.8)
    assert list(got) == [2.0, 8.0] and all(m.ok == 10 for m in got.values())
    assert got[2.0].ttft == _ms(102.869937, 103.947162, 105.324486)
    assert got[8.0].e2e[50] == pytest.approx(0.421689234, rel=1e-12)
    assert got[8.0].itl[99] == pytest.approx(0.021416918600666666, rel=1e-12)
    assert "arrivals: poisson at 8/s, 10 requests (aiperf's input_config)" in got[8.0].notes


def test_a_sweep_is_keyed_by_the_rate_each_summary_records(tmp_path: Path) -> None:
    for rate in (4.0, 8.0):
        data = json.loads(SUMMARY.read_text())
        data["input_config"]["phases"][0]["rate"] = rate
        (tmp_path / f"v{rate:g}").mkdir()
        (tmp_path / f"v{rate:g}" / aiperf.SUMMARY).write_text(json.dumps(data))
    got = aiperf.read_sweep(tmp_path, cpu_s=9.0, wall_s=20.0)
    assert list(got) == [4.0, 8.0] and got[8.0].ok == 30 and got[4.0].cpu_s == 9.0
    assert any("whole sweep of 2 rates" in n for n in got[4.0].notes)


def test_the_recorded_search_is_read_from_its_history() -> None:
    # --search-space phases.profiling.rate:1,16:real, 4 iterations of 10 requests, against
    # an echo server of 2 slots (capacity 5/s), SLA time_to_first_token p99 < 300 ms
    path = RECORDED / "search" / aiperf.HISTORY
    got = aiperf.read_search(path, cpu_s=21.3, wall_s=34.3)
    assert got.iterations == ((9.232202558909872, False), (11.727840495586292, False),
                              (5.5394587012833245, False), (1.5683939093167254, True))
    assert (got.feasible_max, got.infeasible_min) == (1.5683939093167254, 5.5394587012833245)
    assert got.breach == "time_to_first_token p99 494.76413095000004 not lt 300.0"
    assert (got.convergence, got.cpu_s, got.raw) == ("max_iterations", 21.3, path)


def test_the_recorded_trace_replay_is_read() -> None:
    # tests/fixtures/traces/mooncake.jsonl (6 rows, 16-token blocks) on its own timestamps:
    # --custom-dataset-type mooncake_trace --fixed-schedule --fixed-schedule-auto-offset
    got = aiperf.read_summary(RECORDED / "trace" / aiperf.SUMMARY)
    assert got.ok == 6 and "arrivals: fixed_schedule, 6 requests (aiperf's input_config)" \
        in got.notes
    assert got.e2e == _ms(176.774485, 247.7042445, 266.00552985)
    assert got.ttft[50] == pytest.approx(0.1028582595, rel=1e-12)


def test_the_search_asks_aiperf_for_a_rate_search_under_the_slas(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []

    def fake_run(cmd, cwd, env, timeout):  # the tool's place: write what it wrote
        seen.append(cmd)
        shutil.copy(RECORDED / "search" / aiperf.HISTORY, cwd / "artifacts" / aiperf.HISTORY)
        return None, 21.3, 34.3

    monkeypatch.setattr(aiperf, "run_counted", fake_run)
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{}")
    load = Load(url="http://127.0.0.1:9", model="echo", rate=4, requests=10, prompt_tokens=32,
                output_tokens=16, tokenizer=tmp_path / "tok")
    got = aiperf.slo_search(load, {"time_to_first_token:p99": 300}, 1, 16, tmp_path / "w",
                            Path("/venv"), iterations=4, initial=2)
    cmd = seen[0]
    assert cmd[cmd.index("--search-space") + 1] == "phases.profiling.rate:1,16:real"
    assert cmd[cmd.index("--search-sla") + 1] == "time_to_first_token:p99:lt:300"
    assert cmd[cmd.index("--search-max-iterations") + 1] == "4"
    assert got.feasible_max == 1.5683939093167254 and got.cpu_s == 21.3


def test_a_trace_format_it_has_no_loader_for_is_refused(tmp_path: Path) -> None:
    load = Load(url="http://127.0.0.1:9", model="echo", rate=1, requests=1, prompt_tokens=1,
                output_tokens=1, tokenizer=tmp_path)
    with pytest.raises(ValueError, match="not 'azure'"):
        aiperf.replay_trace(tmp_path / "azure.csv", load, tmp_path, Path("/venv"), fmt="azure")


def test_a_missing_output_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=str(tmp_path / aiperf.SUMMARY)):
        aiperf.read_summary(tmp_path / aiperf.SUMMARY)
    with pytest.raises(FileNotFoundError, match=f"{aiperf.SUMMARY} under {tmp_path}"):
        aiperf.one_summary(tmp_path)
    with pytest.raises(OutputError, match=str(tmp_path / aiperf.HISTORY)):
        aiperf.read_search(tmp_path / aiperf.HISTORY)


def test_a_corrupt_output_names_the_file(tmp_path: Path) -> None:
    broken = tmp_path / aiperf.SUMMARY
    broken.write_text(SUMMARY.read_text()[:5000])  # cut off mid-write
    with pytest.raises(ValueError, match=f"{broken}: not readable"):
        aiperf.read_summary(broken)
    data = json.loads(SUMMARY.read_text())
    del data["inter_token_latency"]
    broken.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"{broken}: no 'inter_token_latency'"):
        aiperf.read_summary(broken)
    data = json.loads(SUMMARY.read_text())
    data["request_latency"].pop("p99")
    broken.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"{broken}: 'request_latency' lacks"):
        aiperf.read_summary(broken)
    history = tmp_path / aiperf.HISTORY
    history.write_text(json.dumps({"iterations": [{"feasible": True}]}))
    with pytest.raises(ValueError, match=f"{history}: iterations without"):
        aiperf.read_search(history)


def test_the_command_asks_for_the_load(tmp_path: Path) -> None:
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    (tokenizer / "tokenizer.json").write_text("{}")
    load = Load(url="http://127.0.0.1:9", model="echo", rate=2.5, requests=60,
                prompt_tokens=32, output_tokens=16, tokenizer=tokenizer, seed=7)
    cmd = aiperf.command(load, tmp_path / "work" / "artifacts", Path("/venv"))
    assert cmd[:2] == ["/venv/bin/aiperf", "profile"]
    flags = dict(zip(cmd[2::2], cmd[3::2], strict=False))
    pairs = {"--request-rate": "2.5", "--arrival-pattern": "poisson", "--request-count": "60",
             "--isl": "32", "--osl": "16", "--random-seed": "7", "--url": load.url,
             "--endpoint-type": "completions", "--tokenizer": aiperf.HUB_REPO}
    assert all(c in cmd and cmd[cmd.index(c) + 1] == v for c, v in pairs.items()), flags
    assert "--streaming" in cmd and "--use-server-token-count" in cmd
    # the tokenizer is linked into the run's own hub cache, where HF_HUB_OFFLINE finds it
    snapshot = (tmp_path / "work" / "hf-hub" / "models--local--tokenizer" / "snapshots"
                / aiperf.HUB_COMMIT)
    assert (snapshot / "tokenizer.json").resolve() == (tokenizer / "tokenizer.json").resolve()
    shutil.rmtree(tokenizer)
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        aiperf.command(load, tmp_path / "again" / "artifacts", Path("/venv"))
