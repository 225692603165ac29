"""Shadow replay through Locust against real reference engines: full vs full, live metrics,
`--processes 2`, a candidate killed mid-run then `--resume`, and Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry

from layergate.exporters.traffic import TrafficRecord, read_traffic, traffic_sha256, write_traffic
from layergate.harness.processes import ManagedProcess, free_port, layergate_command
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.replay.live import ReplayMetrics
from layergate.harness.rundir import RunDir, load_run
from layergate.harness.scenarios import SCENARIOS_DIR
from layergate.harness.stack.engines import start_engine
from tests.support.processes import interruptible

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.locust]


def small_traffic(path: Path, n: int, max_tokens: int = 8, spacing: float = 0.25) -> Path:
    """The first n short / medium bundled eval requests, capped at max_tokens, sent
    `spacing` seconds apart."""
    records = [r for r in read_traffic(SCENARIOS_DIR / "traffic" / "eval.jsonl").records
               if r.scenario != "long"][:n]
    return write_traffic(path, [TrafficRecord(r.id, i * spacing, r.scenario, r.endpoint,
                                              {**r.body, "max_tokens": max_tokens})
                                for i, r in enumerate(records)])


@pytest.fixture(scope="module")
def candidate() -> Iterator[ManagedProcess]:
    proc = start_engine("--skip-policy", "full")
    yield proc
    proc.stop()


def _wait_for_rows(out: Path, arm: str, n: int, timeout: float = 120) -> None:
    run = RunDir(out)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run.results_path.exists():
            with contextlib.suppress(Exception), run.open_store(create=False) as store:
                if store.counts_by_arm().get(arm, {}).get("ok", 0) >= n:
                    return
        time.sleep(0.1)
    raise AssertionError(f"no {n} {arm} results in {out} after {timeout}s")


def _recorded(out: Path, arm: str) -> list[tuple[str, float]]:
    """(request_id, recorded_at) of the arm's rows: a row rewritten would change."""
    with RunDir(out).open_store(create=False) as store:
        return sorted((row.result.request_id, row.recorded_at) for row in store.rows()
                      if row.result.arm == arm)


def test_full_vs_full_writes_a_complete_run(tmp_path: Path, full_engine: ManagedProcess,
                                            candidate: ManagedProcess) -> None:
    records = list(read_traffic(small_traffic(tmp_path / "t.jsonl", 6)).records)
    first = records[0]
    records[0] = TrafficRecord(first.id, first.offset_s, first.scenario, first.endpoint,
                               {**first.body, "logprobs": True, "top_logprobs": 2})
    traffic = write_traffic(tmp_path / "t.jsonl", records)
    arms = {"baseline": full_engine.url, "baseline2": full_engine.url,
            "candidate": candidate.url}
    port = free_port()
    config = ReplayConfig(out=tmp_path / "run", arms=arms, traffic=traffic, rate=4.0,
                          metrics_port=port, metrics_linger_s=0, progress=False)
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(str(run_replay(config))))
    thread.start()
    live = ""
    while thread.is_alive() and "layergate_replay_requests_total{" not in live:
        with contextlib.suppress(httpx.HTTPError):
            live = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
        time.sleep(0.2)
    thread.join(300)
    assert seen, "run_replay raised; see the test log"
    assert 'layergate_replay_requests_total{arm="' in live

    run = load_run(seen[0])
    assert run.manifest.status == "complete" and run.manifest.kind == "replay"
    assert run.manifest.arms == arms
    assert run.manifest.traffic["sha256"] == traffic_sha256(RunDir(run.path).traffic_path)
    assert run.manifest.counts == {arm: {"ok": 6, "error": 0} for arm in arms}
    assert run.manifest.config["rate"] == 4.0 and run.manifest.versions["locust"]
    assert sorted((s.arm, s.when) for s in run.scrapes) == sorted(
        (arm, when) for arm in arms for when in ("before", "after"))
    after = next(s.text for s in run.scrapes if (s.arm, s.when) == ("candidate", "after"))
    assert "layergate_requests_total" in after
    assert len(run.results) == 18
    for result in run.results:
        assert result.ok and result.finish_reason in ("stop", "length")
        assert 0 < result.ttft_s <= result.e2e_s
        assert result.token_ids and len(result.token_ids) == result.output_tokens
        assert len(result.itl_s) >= 1 and result.extension["policy"] == "full"
        assert result.prompt_tokens > 0 and result.max_tokens == 8
    with_logprobs = [r for r in run.results if r.request_id == first.id]
    for result in with_logprobs:
        assert len(result.logprobs) == len(result.top_logprobs) == result.output_tokens
        assert all(len(top) == 2 for top in result.top_logprobs)
    by_key = {(r.request_id, r.arm): r for r in run.results}
    agree = sum(by_key[(rid, "candidate")].token_ids == by_key[(rid, "baseline")].token_ids
                for rid, _ in by_key)
    assert agree >= 3 * 4, "full vs full should mostly agree token for token"

    metrics = ReplayMetrics(registry := CollectorRegistry())
    for result in run.results:
        metrics.observe(result)
    compared = sum(registry.get_sample_value("layergate_replay_compared_total",
                                             {"arm": "candidate", "scenario": s}) or 0
                   for s in ("short", "medium"))
    assert compared == 6
    assert registry.get_sample_value("layergate_replay_requests_total", {
        "arm": "baseline", "scenario": "short", "status": "ok"}) == Counter(
        r.scenario for r in run.results if r.arm == "baseline")["short"]


def test_two_processes_give_the_same_results_as_one(tmp_path: Path,
                                                    full_engine: ManagedProcess) -> None:
    traffic = small_traffic(tmp_path / "t.jsonl", 3, max_tokens=2)
    arms = {"baseline": full_engine.url, "candidate": full_engine.url}
    counts = {}
    workers = {}
    for processes in (1, 2):
        out = tmp_path / f"run{processes}"
        run_replay(ReplayConfig(out=out, arms=arms, traffic=traffic, users=2,
                                processes=processes, progress=False))
        run = load_run(out)
        assert run.manifest.status == "complete"
        counts[processes] = Counter((r.request_id, r.arm, r.ok) for r in run.results)
        with RunDir(out).open_store(create=False) as store:
            workers[processes] = {row.worker for row in store.rows()}
    assert counts[1] == counts[2] and sum(counts[2].values()) == 6
    assert len(workers[2]) == 2, "both Locust workers should have sent requests"


def test_killed_candidate_is_recorded_and_resume_fills_the_gaps(
        tmp_path: Path, full_engine: ManagedProcess, candidate: ManagedProcess) -> None:
    traffic = small_traffic(tmp_path / "t.jsonl", 4, max_tokens=6, spacing=2.0)
    out = tmp_path / "run"
    arms = {"baseline": full_engine.url, "candidate": candidate.url}
    restarted: list[ManagedProcess] = []

    def kill_then_restart() -> None:
        _wait_for_rows(out, "candidate", 1)
        candidate.stop(sig=signal.SIGKILL)
        restarted.append(start_engine("--skip-policy", "full"))  # meanwhile the run goes on

    killer = threading.Thread(target=kill_then_restart)
    killer.start()
    run_replay(ReplayConfig(out=out, arms=arms, traffic=traffic, timeout=60, progress=False))
    run = load_run(out)
    assert run.manifest.status == "complete"  # every (request, arm) has a row
    assert run.manifest.counts["baseline"] == {"ok": 4, "error": 0}
    failed = [r for r in run.results if r.arm == "candidate" and not r.ok]
    assert failed and len(failed) + run.manifest.counts["candidate"]["ok"] == 4
    assert all(r.error for r in failed)
    assert any("connect" in r.error.lower() for r in failed)
    assert any("candidate after" in n for n in run.manifest.notes)  # its scrape failed
    baseline_rows = _recorded(out, "baseline")

    killer.join()
    assert restarted, "the candidate did not restart"
    try:
        arms = {**arms, "candidate": restarted[0].url}
        run_replay(ReplayConfig(out=out, arms=arms, resume=True, timeout=60, progress=False))
    finally:
        restarted[0].stop()
    run = load_run(out)
    assert run.manifest.status == "complete"
    assert run.manifest.arms["candidate"] == restarted[0].url
    assert run.manifest.counts == {"baseline": {"ok": 4, "error": 0},
                                   "candidate": {"ok": 4, "error": 0}}
    assert _recorded(out, "baseline") == baseline_rows


def test_ctrl_c_marks_the_run_interrupted_and_resume_completes(
        tmp_path: Path, full_engine: ManagedProcess) -> None:
    traffic = small_traffic(tmp_path / "t.jsonl", 3, max_tokens=2, spacing=2.0)
    out = tmp_path / "run"
    args = ["replay", "--traffic", str(traffic), "--baseline", full_engine.url,
            "--candidate", full_engine.url, "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(layergate_command(*args), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=interruptible)
    _wait_for_rows(out, "baseline", 1)
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 1, output
    assert "interrupted" in output
    manifest = RunDir(out).read_manifest()
    assert manifest.status == "interrupted" and manifest.finished
    done = load_run(out).results
    assert 1 <= len(done) < 6

    resumed = subprocess.run(layergate_command(*args, "--resume"), capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    run = load_run(out)
    assert run.manifest.status == "complete" and len(run.results) == 6
    assert all(r.ok for r in run.results)
