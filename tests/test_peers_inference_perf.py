"""The inference-perf adapter's parser on a report the tool really wrote (0.7.0, 30 requests at
3/s against the echo server: tests/fixtures/peers/inference-perf/), and its clear errors on a
missing or broken one. The tool itself is not needed: only its output is read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.peers import inference_perf as ip
from benchmarks.peers.common import Load

RECORDED = Path(__file__).resolve().parent / "fixtures" / "peers" / "inference-perf"
SUMMARY = RECORDED / "summary_lifecycle_metrics.json"
STAGE = RECORDED / "stage_0_lifecycle_metrics.json"

# read off the recorded summary by hand: successes.latency.<metric>.{median,p90,p99}
TTFT = {50: 0.10271055350131064, 90: 0.10625901130042621, 99: 0.10832539484963491}
TPOT = {50: 0.020796145333345825, 90: 0.021386174013387063, 99: 0.02148573909394569}
E2E = {50: 0.4163584069992794, 90: 0.42544937930033483, 99: 0.42885514957102716}
# successes.latency.inter_token_latency (every gap of every request, pooled): median 0.0
POOLED_ITL = "0.0000/0.0210/0.0241"


def test_the_recorded_summary_reads_into_the_tools_own_figures() -> None:
    m = ip.parse(SUMMARY, cpu_s=1.5, wall_s=12.0)
    assert m.tool == "inference-perf"
    assert m.ttft == TTFT
    assert m.itl == TPOT
    assert m.e2e == E2E
    assert m.ok == 30
    assert (m.cpu_s, m.wall_s, m.raw) == (1.5, 12.0, SUMMARY)
    assert any(POOLED_ITL in note for note in m.notes)
    assert not any("failed" in note for note in m.notes)


def test_a_stage_report_reads_the_same_as_the_summary_of_its_one_stage_run() -> None:
    stage, summary = ip.parse(STAGE, 0, 0), ip.parse(SUMMARY, 0, 0)
    assert (stage.ttft, stage.itl, stage.e2e, stage.ok) == (
        summary.ttft, summary.itl, summary.e2e, summary.ok)


def test_a_missing_report_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "reports" / ip.SUMMARY
    with pytest.raises(ip.OutputError, match="summary_lifecycle_metrics.json"):
        ip.parse(path, 0, 0)


def test_a_truncated_report_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / ip.SUMMARY
    path.write_text(SUMMARY.read_text()[:500])
    with pytest.raises(ip.OutputError, match=f"{path}: not readable as inference-perf's JSON"):
        ip.parse(path, 0, 0)


def test_a_report_without_a_percentile_is_an_error_naming_file_and_figure(
        tmp_path: Path) -> None:
    report = json.loads(SUMMARY.read_text())
    del report["successes"]["latency"]["time_to_first_token"]["p99"]
    path = tmp_path / ip.SUMMARY
    path.write_text(json.dumps(report))
    with pytest.raises(ip.OutputError, match=f"{path}.*time_to_first_token.*p99"):
        ip.parse(path, 0, 0)


def test_a_report_of_another_shape_is_an_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / ip.SUMMARY
    path.write_text(json.dumps([{"successes": 1}]))
    with pytest.raises(ip.OutputError, match=f"{path}.*successes"):
        ip.parse(path, 0, 0)


def test_failures_the_tool_counted_are_said(tmp_path: Path) -> None:
    report = json.loads(SUMMARY.read_text())
    report["failures"]["count"] = 3
    path = tmp_path / ip.SUMMARY
    path.write_text(json.dumps(report))
    assert any("3 failed" in note for note in ip.parse(path, 0, 0).notes)


def test_a_sweep_reads_each_stage_report_in_stage_order(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_invoke(cfg: dict, work: Path, venv: Path, timeout: float = 0) -> tuple[float, float]:
        assert cfg["load"]["sweep"]["num_stages"] == 2 and cfg["load"]["stages"] == []
        assert cfg["report"]["goodput"] == {"constraints": {"ttft": 0.5}}
        reports = Path(cfg["storage"]["local_storage"]["path"])
        reports.mkdir(parents=True)
        for n in (10, 2):  # stage 10 sorts after stage 2
            shutil.copy(STAGE, reports / f"stage_{n}_lifecycle_metrics.json")
        return 3.0, 40.0

    monkeypatch.setattr(ip, "invoke", fake_invoke)
    stages = ip.sweep(_load(), tmp_path, tmp_path, stages=2, stage_duration=5,
                      slo={"ttft": 0.5})
    assert [m.raw.name for m in stages] == ["stage_2_lifecycle_metrics.json",
                                           "stage_10_lifecycle_metrics.json"]
    assert all(m.ttft == TTFT and m.cpu_s == 3.0 for m in stages)


def _load(rate: float = 8.0, requests: int = 60) -> Load:
    return Load(url="http://127.0.0.1:1", model="echo", rate=rate, requests=requests,
                prompt_tokens=32, output_tokens=16, tokenizer=Path("/tok"))


def test_a_stage_is_whole_seconds_sending_exactly_the_requests() -> None:
    assert ip.stage_of(_load(2.0, 60)) == (2.0, 30)
    assert ip.stage_of(_load(8.0, 60)) == (7.5, 8)
    assert ip.stage_of(_load(100.0, 30)) == (30.0, 1)


def test_the_config_streams_poisson_and_counts_the_servers_tokens(tmp_path: Path) -> None:
    cfg = ip.config(_load(), tmp_path, {"type": "poisson", "stages": []})
    assert cfg["api"] == {"type": "completion", "streaming": True}
    assert cfg["report"]["request_lifecycle"]["use_server_output_tokens"] is True
    assert cfg["data"]["input_distribution"]["mean"] == 32
    assert cfg["data"]["output_distribution"]["mean"] == 16
    assert cfg["tokenizer"]["pretrained_model_name_or_path"] == "/tok"


def test_the_install_keeps_the_dependency_checks_and_skips_only_the_python_one() -> None:
    deps, tool = ip.INSTALL
    assert "--ignore-requires-python" not in deps
    assert tool == ["--no-deps", "--ignore-requires-python", "inference-perf==0.7.0"]
