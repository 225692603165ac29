"""The GuideLLM adapter reads GuideLLM's own report: a real one, recorded from `guidellm run`
(0.8.1) against the echo server (tests/fixtures/peers/guidellm/, README there), read into the
figures the file holds; a missing or broken report is an error naming the file. GuideLLM
itself is not needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.peers import guidellm
from benchmarks.peers.common import Load, OutputError, read_truth

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "peers" / "guidellm"
REPORT = FIXTURE / "benchmarks.json"

# read by hand from the recorded benchmarks.json: benchmarks[0].metrics.<name>.successful
# .percentiles.p50 / p90 / p99 (ms for the first two, seconds for request_latency)
TTFT_MS = {50: 103.65104675292969, 90: 106.53352737426758, 99: 110.68344116210938}
ITL_MS = {50: 21.306006113688152, 90: 21.781158447265625, 99: 22.092421849568684}
E2E_S = {50: 0.42265892028808594, 90: 0.4327046871185303, 99: 0.43502259254455566}


def _read(path: Path = REPORT) -> guidellm.Measured:
    return guidellm.measured(guidellm.read_report(path), path, cpu_s=1.5, wall_s=2.5)


def test_the_recorded_report_reads_into_its_own_figures_in_seconds() -> None:
    m = _read()
    assert m.tool == "guidellm" and m.ok == 30 and m.raw == REPORT
    assert m.ttft == pytest.approx({q: v / 1e3 for q, v in TTFT_MS.items()}, rel=1e-12)
    assert m.itl == pytest.approx({q: v / 1e3 for q, v in ITL_MS.items()}, rel=1e-12)
    assert m.e2e == pytest.approx(E2E_S, rel=1e-12)
    assert (m.cpu_s, m.wall_s) == (1.5, 2.5)  # the run's, not the report's
    assert "strategy: poisson@4.000, 1 worker process(es)" in m.notes


def test_the_recording_is_the_echo_servers_run_and_close_to_its_truth() -> None:
    # the server saw the same 30 requests; GuideLLM's times are the client's, so a little
    # longer than the server's, never shorter by more than clock noise
    m, truth = _read(), read_truth(FIXTURE / "timeline.jsonl")
    assert truth.requests == m.ok
    for q in (50, 90):
        assert truth.ttft[q] - 0.001 <= m.ttft[q] <= truth.ttft[q] + 0.01
        assert m.itl[q] == pytest.approx(truth.itl[q], abs=0.002)
        assert truth.e2e[q] - 0.001 <= m.e2e[q] <= truth.e2e[q] + 0.01


def test_a_missing_report_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "benchmarks.json"
    with pytest.raises(OutputError, match=str(missing)):
        _read(missing)


@pytest.mark.parametrize("text", ["", "{\"benchmarks\": [", "[1, 2]", "{\"config\": {}}",
                                  "{\"benchmarks\": [1]}"])
def test_a_report_that_is_not_guidellms_names_the_file(tmp_path: Path, text: str) -> None:
    broken = tmp_path / "benchmarks.json"
    broken.write_text(text)
    with pytest.raises(OutputError, match=str(broken)):
        _read(broken)


def test_a_report_without_a_figure_names_the_file_and_the_figure(tmp_path: Path) -> None:
    doc = json.loads(REPORT.read_text())
    del doc["benchmarks"][0]["metrics"]["inter_token_latency_ms"]
    cut = tmp_path / "benchmarks.json"
    cut.write_text(json.dumps(doc))
    with pytest.raises(guidellm.ReportError, match=f"{cut}.*inter_token_latency_ms"):
        _read(cut)


def test_an_empty_report_names_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "benchmarks.json"
    empty.write_text(json.dumps({"benchmarks": []}))
    with pytest.raises(guidellm.ReportError, match=f"{empty} has 0 benchmarks"):
        _read(empty)


def test_the_command_asks_for_the_load_streamed_poisson_and_a_json_report(
        tmp_path: Path) -> None:
    load = Load(url="http://127.0.0.1:9", model="echo", rate=8.0, requests=60,
                prompt_tokens=32, output_tokens=16, tokenizer=Path("/tok"), seed=3)
    cmd = guidellm.command(tmp_path / "venv", load, tmp_path / "r.json",
                           {"kind": "poisson", "rate": [8.0]}, guidellm._synthetic(load))
    opts = dict(zip(cmd[2::2], (json.loads(v) for v in cmd[3::2]), strict=False))
    assert cmd[:2] == [str(tmp_path / "venv" / "bin" / "guidellm"), "run"]
    assert opts["--backend"] == {"kind": "openai_http", "target": load.url, "model": "echo",
                                 "request_format": "/v1/completions", "stream": True,
                                 "validate_backend": False}
    assert opts["--data"] == {"kind": "synthetic_text", "prompt_tokens": 32,
                              "output_tokens": 16}
    assert opts["--tokenizer"]["model"] == "/tok" and opts["--seed"]["value"] == 3
    assert opts["--output"] == {"kind": "json", "path": str(tmp_path / "r.json")}
    assert guidellm.INSTALL[0] == ["torch==2.13.0"]
    assert "torch==2.13.0" in guidellm.INSTALL[1]


def test_the_goodput_search_reads_guidellms_conclusion() -> None:
    # the recorded search's conclusion, beside the recorded run's benchmark
    doc = json.loads(REPORT.read_text())
    doc.update(json.loads((FIXTURE / "goodput-conclusions.json").read_text()))
    found = guidellm.search(doc, REPORT, cpu_s=1.0, wall_s=2.0)
    assert (found.best_passing_streams, found.lowest_failing_streams) == (4, 5)
    assert found.stop_reason == "converged"
    assert [(p["streams"], p["passed"]) for p in found.probes] == [
        (4, True), (8, False), (6, False), (5, False)]
    assert [m.ok for m in found.measured] == [30]


def test_a_report_without_a_goodput_conclusion_names_the_file() -> None:
    with pytest.raises(guidellm.ReportError, match=f"{REPORT} has no goodput conclusion"):
        guidellm.search(guidellm.read_report(REPORT), REPORT, cpu_s=0.0, wall_s=0.0)
