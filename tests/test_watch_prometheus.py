"""`layergate watch` end to end against a real Prometheus: vLLM-shaped arms read through the
mapping file, hooks, the HTTP answers for Flagger and Argo Rollouts, and the no-data
states (a selector that matches nothing, Prometheus stopped mid-watch).

The arms are `tests/support/vllm_exporter.py` stand-ins serving vLLM's metric names and
labels as vLLM 0.32 serves them (the real vLLM runs in tests/test_vllm_arms.py; here an arm's
latency must turn at a chosen moment); Prometheus, the CLI, its HTTP server and the hooks are
the real ones. Windows of 2 s over a 0.5 s scrape keep each test within seconds.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from layergate.harness.processes import free_port, layergate_command
from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus import PrometheusServer, start_prometheus
from layergate.harness.stack.prometheus_config import ScrapeTargets
from tests.support.vllm_exporter import FakeVllm

pytestmark = [pytest.mark.prometheus]

SCRAPE_S = 0.5
WINDOW = ["--window", "2s", "--lag", "0.6s"]
STABLE, CANARY = 'job="vllm-stable"', 'job="vllm-canary"'
HOOKS = ('echo "$LAYERGATE_WATCH_DECISION $LAYERGATE_WATCH_STAGE $LAYERGATE_WATCH_NEXT_STAGE '
         '$LAYERGATE_WATCH_EXIT_CODE" >> {log}')
# looser than the shipped policy: 2 s windows hold ~200 requests an arm, not a production
# minute's thousands, and the test must decide within a few windows
POLICY = {"name": "test", "alpha": 0.05, "metrics": {
    "e2e_ratio": {"direction": "<=", "threshold": 1.4},
    "tpot_ratio": {"direction": "<=", "threshold": 1.4},
    "error_rate_delta": {"direction": "<=", "threshold": 0.05},
    "cache_hit_rate_delta": {"direction": ">=", "threshold": -0.2, "critical": False}}}


@dataclass
class Arms:
    stable: FakeVllm
    canary: FakeVllm
    prometheus: PrometheusServer
    policy: Path


def _jobs(stable: FakeVllm, canary: FakeVllm) -> tuple[dict, ...]:
    return tuple({"job_name": f"vllm-{name}", "static_configs": [{"targets": [arm.target]}]}
                 for name, arm in (("stable", stable), ("canary", canary)))


def _prometheus(procs: ProcessSet, stable: FakeVllm, canary: FakeVllm,
                work: Path) -> PrometheusServer:
    prom = start_prometheus(procs, ScrapeTargets(engines={}, scrape_interval_s=SCRAPE_S,
                                                 extra_jobs=_jobs(stable, canary)), work)
    got = prom.wait_for('count(up{job=~"vllm-.+"} == 1) == 2', timeout=30)
    assert got, "Prometheus never scraped both vLLM stand-ins"
    return prom


@pytest.fixture(scope="module")
def arms(tmp_path_factory, prometheus_bin) -> Iterator[Arms]:
    work = tmp_path_factory.mktemp("watch-vllm")
    policy = work / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    procs = ProcessSet(work / "logs")
    with FakeVllm("llama-stable", rate=100, seed=1) as stable, \
            FakeVllm("llama-canary", rate=100, seed=2) as canary:
        try:
            yield Arms(stable, canary, _prometheus(procs, stable, canary, work / "prom"), policy)
        finally:
            procs.close()


def _watch(prom: PrometheusServer, out: Path, *args: str, policy: Path | None = None,
           serve: int | None = None) -> subprocess.Popen:
    cmd = layergate_command("watch", "--prometheus", prom.url, "--engine", "vllm", *WINDOW,
                            "--json", str(out / "watch.json"),
                            "--on-advance", HOOKS.format(log=out / "hooks.log"),
                            "--on-rollback", HOOKS.format(log=out / "hooks.log"), *args)
    if policy is not None:
        cmd += ["--policy", str(policy)]
    if serve is not None:
        cmd += ["--serve", str(serve)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _status(port: int, **params: str) -> dict:
    return httpx.get(f"http://127.0.0.1:{port}/status", params=params, timeout=5).json()


def _wait(pred, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            pytest.fail(f"watch exited {proc.returncode} while waiting for {what}:\n"
                        f"{proc.stdout.read()}")
        time.sleep(0.25)
    proc.terminate()
    pytest.fail(f"timed out waiting for {what}:\n{proc.communicate(timeout=10)[0]}")


def _hooks(out: Path) -> list[str]:
    log = out / "hooks.log"
    return log.read_text().splitlines() if log.exists() else []


def test_vllm_canary_advances_then_rolls_back_when_it_turns_slow(arms: Arms,
                                                                 tmp_path: Path) -> None:
    """Identical arms pass the first stage (the advance hook runs once, Flagger may raise
    the weight once, Argo sees the stage pass); the canary then turns 3x slower and the
    watch rolls back (the rollback hook runs once) and exits 1."""
    port = free_port()
    proc = _watch(arms.prometheus, tmp_path, "--baseline", STABLE, "--candidate", CANARY,
                  "--stages", "5,25,100", "--min-windows", "4", "--max-windows", "40",
                  policy=arms.policy, serve=port)
    try:
        flagger = f"http://127.0.0.1:{port}/flagger"
        _wait(lambda: _status(port)["windows"] >= 1, 60, "a first window", proc)
        # both stand-ins serve alike, so the candidate's observed share is 50 %: Flagger
        # would be at the 25 % stage, which nothing has decided yet
        got = httpx.post(f"{flagger}/confirm-traffic-increase", json={})
        assert got.status_code == 403 and "(observed)" in got.json()["message"]
        assert httpx.get(f"{flagger}/confirm-traffic-increase").status_code == 405
        assert httpx.post(f"{flagger}/rollout", json={"name": "x"}).status_code == 200
        _wait(lambda: _status(port)["stage"] == 25, 90, "stage 5 to pass", proc)
        assert _status(port, stage="5")["stage_verdict"] == "pass"
        assert _hooks(tmp_path) == ["advance 5 25 "]
        assert httpx.post(f"{flagger}/confirm-traffic-increase", json={}).status_code == 403
        assert httpx.post(f"{flagger}/confirm-promotion", json={}).status_code == 403
        arms.canary.slowdown = 3.0
        _wait(lambda: _status(port)["verdict"] == "fail", 90, "the rollback", proc)
        status = _status(port, stage="25")
        assert status["stage_verdict"] == "fail"
        assert any(r.startswith(("e2e_ratio", "tpot_ratio")) for r in status["reasons"])
        assert httpx.post(f"{flagger}/rollout", json={}).status_code == 403
        assert httpx.post(f"{flagger}/rollback", json={}).status_code == 200
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert 'layergate_watch_state{state="fail"} 1.0' in metrics
        assert 'layergate_watch_figure_threshold{figure="e2e_ratio"} 1.4' in metrics
    finally:
        arms.canary.slowdown = 1.0
        proc.terminate()  # --serve keeps answering until stopped
        out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 1, out
    assert _hooks(tmp_path) == ["advance 5 25 ", "rollback 25 0 1"]
    final = json.loads((tmp_path / "watch.json").read_text())
    assert final["verdict"] == "fail" and final["stages_passed"] == [5]
    assert [t["decision"] for t in final["transitions"]] == ["advance", "rollback"]


def test_a_selector_that_matches_nothing_is_no_data_never_a_pass(arms: Arms,
                                                                 tmp_path: Path) -> None:
    """A candidate that has never served (no series yet: a typo, or pods still starting)
    does not count toward --no-data-windows, but --max-windows of it end the watch."""
    proc = _watch(arms.prometheus, tmp_path, "--baseline", STABLE, "--candidate",
                  'job="vllm-nope"', "--no-data-windows", "2", "--min-windows", "3",
                  "--max-windows", "4", policy=arms.policy)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 4, out
    assert 'the candidate selector {job="vllm-nope"} matches no http_requests_total' in out
    assert "the candidate served no traffic in 4 windows" in out
    assert "(none yet: no data until it does)" in out
    final = json.loads((tmp_path / "watch.json").read_text())
    assert final["verdict"] == "no_data" and final["state"] == "no_data"
    assert _hooks(tmp_path) == []


def test_prometheus_stopped_mid_watch_is_no_data(arms: Arms, tmp_path: Path,
                                                 prometheus_bin: str) -> None:
    """Its own Prometheus, stopped once the watch has read windows from it: the watch shows
    no data (a gap: Flagger's rollout check still passes), then ends with exit 4 and tells
    Flagger to roll back."""
    procs = ProcessSet(tmp_path / "logs")
    try:
        prom = _prometheus(procs, arms.stable, arms.canary, tmp_path / "prom")
        port = free_port()
        flagger = f"http://127.0.0.1:{port}/flagger"
        proc = _watch(prom, tmp_path, "--baseline", STABLE, "--candidate", CANARY,
                      "--no-data-windows", "2", "--min-windows", "1000", "--max-windows",
                      "1000", policy=arms.policy, serve=port)
        _wait(lambda: _status(port)["windows"] >= 1, 60, "a window", proc)
        prom.process.stop()
        _wait(lambda: _status(port)["state"] == "no_data", 30, "the no-data state", proc)
        if _status(port)["verdict"] == "pending":  # a gap is no failed check for Flagger
            assert httpx.post(f"{flagger}/rollout", json={}).status_code == 200
        _wait(lambda: _status(port)["verdict"] == "no_data", 30, "the no-data verdict", proc)
        assert "did not answer" in _status(port)["reasons"][0]
        assert httpx.post(f"{flagger}/rollout", json={}).status_code == 403
        assert httpx.post(f"{flagger}/rollback", json={}).status_code == 200
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    finally:
        procs.close()
    assert proc.returncode == 4, out
    assert "Prometheus at http://127.0.0.1" in out
    assert _hooks(tmp_path) == []


def test_a_malformed_selector_is_a_usage_error(arms: Arms, tmp_path: Path) -> None:
    proc = _watch(arms.prometheus, tmp_path, "--baseline", STABLE, "--candidate",
                  'job=~"(unclosed"', policy=arms.policy)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2, out
    assert "Prometheus refused" in out
