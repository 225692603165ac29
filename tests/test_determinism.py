"""The repeat suite against a real engine: 3 prompts x 2 repeats at concurrency 1 and 2."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.exporters.traffic import TrafficRecord, read_traffic, write_traffic
from layergate.harness.cli import main
from layergate.harness.processes import ManagedProcess
from layergate.harness.rundir import load_run
from layergate.harness.scenarios import SCENARIOS_DIR


def _traffic(path: Path) -> Path:
    records = read_traffic(SCENARIOS_DIR / "traffic" / "eval.jsonl").records[:5]
    return write_traffic(path, [TrafficRecord(r.id, r.offset_s, r.scenario, r.endpoint,
                                              {**r.body, "max_tokens": 6}) for r in records])


@pytest.mark.model
def test_repeats_store_tokens_latency_and_peak_memory(tmp_path: Path,
                                                      full_engine: ManagedProcess) -> None:
    out = tmp_path / "det"
    result = CliRunner().invoke(main, [
        "determinism", "--target", f"baseline={full_engine.url}",
        "--traffic", str(_traffic(tmp_path / "t")),
        "--repeats", "2", "--concurrency", "1,2", "--requests", "3", "--out", str(out),
        "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "complete" in result.output
    run = load_run(out)
    assert run.manifest.kind == "determinism" and run.manifest.status == "complete"
    assert run.manifest.arms == {"baseline": full_engine.url}
    assert len(run.results) == 12 and all(r.ok for r in run.results)
    assert Counter((r.repeat, r.concurrency) for r in run.results) == {
        (0, 1): 3, (1, 1): 3, (0, 2): 3, (1, 2): 3}
    for r in run.results:
        assert r.token_ids and r.e2e_s > 0 and r.extension["peak_memory_bytes"] > 0
    # greedy, full depth, one request at a time: the repeats are token-identical
    serial = {}
    for r in run.results:
        if r.concurrency == 1:
            serial.setdefault(r.request_id, set()).add(r.token_ids)
    assert all(len(ids) == 1 for ids in serial.values())


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    traffic = _traffic(tmp_path / "t")
    runner = CliRunner()
    cases = [(["--repeats", "1"], "--repeats"),
             (["--repeats", "2", "--concurrency", "0,2"], "--concurrency"),
             (["--repeats", "2", "--target", "x=ftp://x"], "http(s) URL")]
    for extra, message in cases:
        args = ["determinism", "--target", "http://127.0.0.1:9", "--traffic", str(traffic),
                "--out", str(tmp_path / "o"), *extra]
        result = runner.invoke(main, args)  # the group renders errors
        assert result.exit_code == 2 and message in result.output, result.output
