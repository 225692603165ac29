"""Saturation: queueing read from the stored per-request timings, and what the gate does
with a saturated run (its latency verdicts are inconclusive, never pass or fail)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.saturation import peak_in_flight
from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.gate import apply_policy
from layergate.harness.gate.fixed.evaluation import run_figures
from layergate.harness.gate.policy import parse_policy
from layergate.harness.manifest import Manifest
from layergate.harness.replay.config import ReplayConfig
from layergate.harness.rundir import RunDir, load_run

ARMS = ("baseline", "baseline2", "candidate")
CFG = MetricsConfig(n_resamples=100)
COMPLETE = {"id": "r", "status": "complete", "arms": dict.fromkeys(ARMS, "http://x")}


def _run(n: int = 48, queue_s: float = 0.0, slow: float = 1.0, seed: int = 0
         ) -> tuple[list[ArmResult], dict[str, float]]:
    """Requests every 4 s; with `queue_s`, each arm's wait grows by that much per request
    (a server fed faster than it serves). The candidate's time is `slow` times A's."""
    rng = np.random.default_rng(seed)
    rows, offsets = [], {}
    for i in range(n):
        rid = f"q{i:03d}"
        offsets[rid] = 4.0 * i
        service = rng.uniform(0.8, 1.2)
        for arm in ARMS:
            wait = queue_s * i * rng.uniform(0.9, 1.1)
            scale = slow if arm == "candidate" else 1.0
            ttft = wait + 0.05 * scale * rng.uniform(0.9, 1.1)
            rows.append(ArmResult(rid, arm, "s", True, ttft_s=ttft,
                                  e2e_s=ttft + service * scale, output_tokens=16,
                                  output_text="a b", token_ids=(1, 2)))
    return rows, offsets


POLICY = parse_policy({"metrics": {
    "latency_ratio": {"threshold": 0.10, "subtract_noise_floor": True},
    "exact_match": {"threshold": -0.1, "subtract_noise_floor": True}}})


def _gate(rows, offsets, limit=None):
    figs = compute_figures(rows, config=CFG, offsets=offsets, max_in_flight=limit)
    return figs, apply_policy(POLICY, figs, COMPLETE, rows)


def _growth(figs, arm="baseline"):
    return next(f for f in figs if f.name == "ttft_growth" and f.arm == arm)


def test_an_unloaded_run_is_not_saturated_and_its_latency_is_judged():
    figs, result = _gate(*_run())
    assert not any(_growth(figs, arm).detail["saturated"] for arm in ARMS)
    assert _growth(figs).value == pytest.approx(1.0, abs=0.2)
    assert result.verdict == "pass", result.reasons
    # a candidate 30 % slower fails on latency (excess over the floor 0.3 > 0.10)
    figs, result = _gate(*_run(slow=1.3))
    assert result.verdict == "fail"
    assert {c.name: c.status for c in result.overall}["latency_ratio"] == "fail"


def test_queueing_makes_the_latency_verdict_inconclusive_and_says_lower_the_rate():
    rows, offsets = _run(queue_s=0.5, slow=1.3)
    figs, result = _gate(rows, offsets)
    growth = _growth(figs)
    assert growth.detail["saturated"] and growth.value > 5
    assert any("TTFT grew" in s for s in growth.detail["signals"])
    latency = {c.name: c for c in result.overall}["latency_ratio"]
    # the same candidate failed when unloaded; queued, neither pass nor fail
    assert latency.status == "inconclusive"
    assert "saturated run" in latency.reason and "lower the replay rate" in latency.reason
    assert {c.name: c.status for c in result.overall}["exact_match"] == "pass"
    assert result.verdict == "inconclusive"
    assert any("lower the replay rate" in r for r in result.reasons)
    # every queued arm's saturation is shown, once, with what to do
    shown = [c for c in result.checks if c.name == "ttft_growth"]
    assert sorted(c.arm for c in shown) == sorted(ARMS)
    assert all("saturated" in c.reason and "lower the replay rate" in c.reason for c in shown)


def test_in_flight_at_the_replay_limit_is_saturation():
    rows, offsets = _run(n=30)
    tight = {rid: 0.1 * k for k, rid in enumerate(offsets)}  # 10 per second, ~1 s each
    figs, _ = _gate(rows, tight, limit=8)
    assert _growth(figs).detail["peak_in_flight"] >= 8
    assert any("max_in_flight 8" in s for s in _growth(figs).detail["signals"])
    figs, _ = _gate(rows, tight, limit=None)  # a closed loop is always at its users
    assert not _growth(figs).detail["saturated"]


def _stored_run(path: Path, config: ReplayConfig, legacy: bool = False) -> RunDir:
    """A complete run of `_run`'s rows sent 10 per second, its manifest written by the
    replay of `config` (`legacy`: as before the manifest recorded the in-flight limit)."""
    rows, offsets = _run(n=30)
    run = RunDir(path)
    run.write_traffic(TrafficRecord(rid, 0.1 * k, "s", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": rid}]})
                      for k, rid in enumerate(offsets))
    with run.open_store() as store:
        store.put_many(rows, worker="test")
        counts = store.counts_by_arm()
    manifest = Manifest.new("replay", config.to_json(), config.arms,
                            run.traffic_summary(len(offsets), None), config.in_flight_limit)
    run.write_manifest(manifest.with_status("complete", counts))
    if legacy:
        written = json.loads(run.manifest_path.read_text())
        del written["in_flight_limit"]
        run.manifest_path.write_text(json.dumps(written))
    return run


def _replay(tmp_path: Path, **settings) -> ReplayConfig:
    return ReplayConfig(arms=dict.fromkeys(ARMS, "http://127.0.0.1:9"), out=tmp_path / "run",
                        scenario="smoke", **settings)


def test_a_distributed_replay_records_its_limit_and_the_gate_reads_it(tmp_path: Path):
    """One local process and three other hosts' workers share max_in_flight 10 as 12 users
    (a multiple of the 4 workers): the manifest records 12, and the gate's saturation check
    reads 12, not the 10 that the local processes alone would give."""
    config = _replay(tmp_path, max_in_flight=10, processes=1, expect_workers=3,
                     master_bind="0.0.0.0:5557")
    run = load_run(_stored_run(tmp_path / "run", config).path)
    assert run.manifest.in_flight_limit == 12
    assert {f.detail["max_in_flight"] for f in run_figures(run, CFG)
            if f.name == "ttft_growth"} == {12}


def test_a_closed_loop_records_no_limit_and_old_manifests_still_read(tmp_path: Path):
    closed = _replay(tmp_path, users=4)
    assert load_run(_stored_run(tmp_path / "closed", closed).path).manifest.in_flight_limit \
        is None
    # written before the manifest said: derived from its config, from the local processes
    old = _replay(tmp_path, max_in_flight=10, processes=3)
    run = load_run(_stored_run(tmp_path / "old", old, legacy=True).path)
    assert "in_flight_limit" not in json.loads((tmp_path / "old" / "manifest.json").read_text())
    assert run.manifest.in_flight_limit == 12


def test_peak_in_flight_counts_overlaps_not_touching_ends():
    assert peak_in_flight(np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 1.0])) == 1
    assert peak_in_flight(np.array([0.0, 0.5, 0.7, 5.0]), np.array([1.0, 1.0, 1.0, 1.0])) == 3
    assert peak_in_flight(np.array([np.nan]), np.array([1.0])) == 0


def test_the_report_and_the_demo_say_saturated_and_lower_the_rate():
    from layergate.harness.report.html import render_html
    from layergate.harness.report.markdown import render_markdown
    from layergate.harness.stack.demo_words import plain_words

    _, result = _gate(*_run(queue_s=0.5))
    markdown = render_markdown(result)
    assert "Saturated: baseline, baseline2, candidate queued" in markdown
    assert "lower the replay rate" in markdown
    assert "lower the replay rate" in render_html(result)
    words = plain_words(result, "full")
    assert words[0].startswith("Saturated:") and "lower the replay rate" in words[0]
    _, calm = _gate(*_run())
    assert "Saturated" not in render_markdown(calm)
    assert not any("Saturated" in w for w in plain_words(calm, "full"))


def test_a_stable_queue_is_not_called_saturated_by_one_burst():
    """A stable 4-slot queue (M/D/4, 0.4 s a request) at utilisation 0.5, in the suite's
    5 s capacity steps after a 2 s warm-up: a burst late in a step once made its last
    third's median twice the first's, and the step saturated in 3 % of schedules; a
    queue that grows through the run (each third above the one before) is still caught."""
    from layergate.exporters.figures.slo import parse_slo
    from tests.support.slots import simulated_step

    slo = parse_slo("ttft:5s")

    def saturated(load: float, n: int, draws: int) -> float:
        return float(np.mean([bool(simulated_step("baseline", load, n, 4, 0.1, 4, slo, 2.0,
                                                  seed).saturated)
                              for seed in range(draws)]))

    assert saturated(5, 35, 600) <= 0.01  # utilisation 0.5: 0.030 before the thirds rule
    assert saturated(13, 156, 150) >= 0.6  # utilisation 1.3, 12 s: the queue grows
