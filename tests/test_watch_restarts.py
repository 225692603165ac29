"""`layergate watch --state`: SIGKILLed mid-stage again and again against a real Prometheus,
while a Flagger (tests/support/controllers.py, exporting its `flagger_canary_weight` for
Prometheus to scrape as the real one does) drives it through its webhooks. After every
restart the watch resumes from its state file; at the end it must have decided what an
uninterrupted watch over the same windows decided, run each hook exactly once, and given
each traffic step exactly once.

The arms are the vLLM stand-ins of tests/test_watch_prometheus.py; windows of 2 s over a
0.5 s scrape keep the whole loop within a minute or two.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import threading
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
from tests.support.controllers import FakeFlagger, FlaggerWeight
from tests.support.vllm_exporter import FakeVllm
from tests.test_watch_prometheus import CANARY, POLICY, SCRAPE_S, STABLE, _jobs

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

STAGES = "5,10,25,50,100"
# six windows a stage: the ten kills (windows 1 to 4 of a stage) fall in three stages
MIN_WINDOWS = 6
# the shipped Canary's rollout webhook retries, which ride over a restarting watch
FLAGGER_YAML = Path(__file__).resolve().parents[1] / "dashboards" / "rollout" / "flagger.yaml"
RETRIES = next(h["retries"] for d in yaml.safe_load_all(FLAGGER_YAML.read_text())
               if d["kind"] == "Canary" for h in d["spec"]["analysis"]["webhooks"]
               if h["type"] == "rollout")
KILLS = 10
WEIGHT = 'flagger_canary_weight{workload="llm",namespace="llm"}'
HOOK = 'echo "$LAYERGATE_WATCH_DECISION $LAYERGATE_WATCH_STAGE $LAYERGATE_WATCH_NEXT_STAGE" >> {}'


@dataclass
class Stack:
    prometheus: PrometheusServer
    weight: FlaggerWeight
    policy: Path


@pytest.fixture(scope="module")
def stack(tmp_path_factory, prometheus_bin) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("watch-restarts")
    policy = work / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    procs = ProcessSet(work / "logs")
    weight = FlaggerWeight()
    with FakeVllm("llama-stable", rate=100, seed=11) as stable, \
            FakeVllm("llama-canary", rate=100, seed=12) as canary:
        jobs = (*_jobs(stable, canary), {"job_name": "flagger", "static_configs": [
            {"targets": [f"127.0.0.1:{weight.port}"]}]})
        try:
            prom = start_prometheus(procs, ScrapeTargets(engines={}, scrape_interval_s=SCRAPE_S,
                                                         extra_jobs=jobs), work / "prom")
            assert prom.wait_for('count(up{job=~"vllm-.+|flagger"} == 1) == 3', timeout=30), \
                "Prometheus never scraped both stand-ins and the Flagger weight"
            yield Stack(prom, weight, policy)
        finally:
            procs.close()
            weight.close()


def _cmd(stack: Stack, state: Path, hooks: Path, *extra: str) -> list[str]:
    return layergate_command(
        "watch", "--prometheus", stack.prometheus.url, "--engine", "vllm",
        "--baseline", STABLE, "--candidate", CANARY, "--policy", str(stack.policy),
        "--stages", STAGES, "--window", "2s", "--lag", "0.6s",
        "--min-windows", str(MIN_WINDOWS), "--max-windows", "60", "--no-data-windows", "5",
        "--controller-weight", WEIGHT, "--state", str(state),
        "--on-advance", HOOK.format(hooks), "--on-rollback", HOOK.format(hooks), *extra)


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, stdout=log.open("a"), stderr=subprocess.STDOUT)


def _status(port: int) -> dict | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/status", timeout=2).json()
    except httpx.HTTPError:
        return None


class Driver(threading.Thread):
    """Flagger's analysis loop against the watch, one tick every half second."""

    def __init__(self, port: int, weight: FlaggerWeight) -> None:
        super().__init__(daemon=True)
        self.url, self.weight = f"http://127.0.0.1:{port}/flagger", weight
        self.flagger = FakeFlagger(self._call, tuple(int(s) for s in STAGES.split(",")[:-1]),
                                   retries=RETRIES)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.refused = 0  # webhook attempts that found the watch down

    def _call(self, hook: str, payload: dict, _timeout: float) -> tuple[int, None]:
        try:
            got = httpx.post(f"{self.url}/{hook}", json=payload, timeout=2)
        except httpx.HTTPError as exc:  # the watch is down: no answer, retried
            self.refused += 1
            raise OSError(str(exc)) from exc
        return got.status_code, None

    def run(self) -> None:
        try:
            while not self.stop.wait(0.5) and not self.flagger.done:
                before = len(self.flagger.steps)
                self.flagger.tick()
                if len(self.flagger.steps) > before:
                    self.weight.set(self.flagger.weight)
        except BaseException as exc:  # handed to the test
            self.error = exc


def test_a_watch_killed_ten_times_mid_stage_decides_as_an_uninterrupted_one(
        stack: Stack, tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("LAYERGATE_TEST_SEED", "22")))
    ref_state, ref_hooks = tmp_path / "ref-state.json", tmp_path / "ref.hooks"
    state, hooks = tmp_path / "state.json", tmp_path / "watch.hooks"
    stack.weight.set(0)
    reference = _start(_cmd(stack, ref_state, ref_hooks, "--json", str(tmp_path / "ref.json")),
                       tmp_path / "ref.log")
    deadline = time.monotonic() + 30
    while not ref_state.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ref_state.exists(), (tmp_path / "ref.log").read_text()
    shutil.copy(ref_state, state)  # the same window grid: both read the same windows
    port = free_port()
    cmd = _cmd(stack, state, hooks, "--serve", str(port), "--json", str(tmp_path / "w.json"))
    watch = _start(cmd, tmp_path / "watch.log")
    driver = Driver(port, stack.weight)
    driver.start()
    kills: list[tuple[float, int]] = []
    seen: set[tuple[float, int]] = set()
    try:
        deadline = time.monotonic() + 240
        while len(kills) < KILLS and time.monotonic() < deadline:
            if driver.error is not None:
                raise driver.error
            s = _status(port)
            if s is not None and s["verdict"] != "pending":
                break
            if s is None:
                time.sleep(0.1)
                continue
            at = (s["stage"], s["windows"])
            live = s["window_end"] is not None and s["window_end"] > time.time() - 4
            # mid-stage, at least two windows before any transition (and its hook) is due
            if live and 1 <= s["windows"] <= MIN_WINDOWS - 2 and at not in seen:
                seen.add(at)
                time.sleep(rng.uniform(0.0, 1.0))
                watch.send_signal(signal.SIGKILL)
                watch.wait(10)
                kills.append(at)
                watch = _start(cmd, tmp_path / "watch.log")
            time.sleep(0.1)
        assert len(kills) == KILLS, f"only {len(kills)} kills ({kills}) before the verdict:\n" \
            + (tmp_path / "watch.log").read_text()[-3000:]
        assert reference.wait(240) == 0, (tmp_path / "ref.log").read_text()[-3000:]
        while not driver.flagger.done and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        driver.stop.set()
        driver.join(5)
        watch.terminate()
        code = watch.wait(30)
        if reference.poll() is None:
            reference.kill()
    log = (tmp_path / "watch.log").read_text()
    if driver.error is not None:
        raise driver.error
    assert code == 0, log[-3000:]
    assert log.count("resumed from") == KILLS
    ref, got = json.loads(ref_state.read_text()), json.loads(state.read_text())
    # the same windows, hence the same sequences, stages and decision
    assert [w["end"] for w in got["inputs"]] == [w["end"] for w in ref["inputs"]]
    assert got["inputs"] == ref["inputs"]
    final, ref_final = (json.loads((tmp_path / n).read_text()) for n in ("w.json", "ref.json"))
    assert final["verdict"] == ref_final["verdict"] == "pass"
    assert final["transitions"] == ref_final["transitions"]
    # each hook transition ran exactly once
    expected = ["advance 5 10", "advance 10 25", "advance 25 50", "advance 50 100"]
    assert ref_hooks.read_text().splitlines() == expected
    assert hooks.read_text().splitlines() == expected
    assert all(h["state"] == "done" and h["returncode"] == 0 for h in got["hooks"].values())
    # every traffic step granted exactly once, none lost: Flagger went through and promoted
    f = driver.flagger
    assert f.steps == [(0, 5), (5, 10), (10, 25), (25, 50)], f.calls
    assert f.phase == "Succeeded" and f.failed_checks == 0 and f.rolled_back_by is None
    granted = [g["weight"] for g in got["grants"]]
    assert sorted(set(granted)) == [0, 5, 10, 25, 50]
    for g in got["grants"]:  # never a step from a stage the watch had not passed
        assert g["weight"] == 0 or g["weight"] <= max(g["passed"], default=0), g
    print(f"kills {len(kills)} at (stage, window) {kills}; windows {len(got['inputs'])}; "
          f"grants recorded {len(granted)} for {len(f.steps) + 1} steps and promotion; "
          f"Flagger calls {len(f.calls)} ({driver.refused} attempts found the watch down and "
          f"were retried; unanswered after retries {sum(c is None for _, c in f.calls)})")


def test_a_state_file_of_another_rollout_is_refused(stack: Stack, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = _start(_cmd(stack, state, tmp_path / "h"), tmp_path / "first.log")
    deadline = time.monotonic() + 30
    while not state.exists() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    first.terminate()
    first.wait(30)
    assert state.exists(), (tmp_path / "first.log").read_text()
    other = [*_cmd(stack, state, tmp_path / "h"), "--stages", "1,100"]
    got = subprocess.run(other, capture_output=True, text=True, timeout=60)
    assert got.returncode == 2, got.stderr
    text = " ".join(got.stderr.split())
    assert "was written for another rollout" in text
    assert 'stages: [5.0, 10.0, 25.0, 50.0, 100.0] in the file, [1.0, 100.0] now' in text


def test_a_hook_killed_while_it_ran_is_reported_then_rerun_or_failed(
        stack: Stack, tmp_path: Path) -> None:
    state, log = tmp_path / "state.json", tmp_path / "hook.log"
    slow = f'echo "start $$" >> {log}; sleep 30; echo end >> {log}'
    base = layergate_command(
        "watch", "--prometheus", stack.prometheus.url, "--engine", "vllm",
        "--baseline", STABLE, "--candidate", CANARY, "--policy", str(stack.policy),
        "--stages", "50,100", "--window", "2s", "--lag", "0.6s", "--min-windows", "4",
        "--max-windows", "60", "--state", str(state))
    watch = _start([*base, "--on-advance", slow], tmp_path / "w.log")
    try:
        deadline = time.monotonic() + 90
        while not (log.exists() and log.read_text().startswith("start")) \
                and time.monotonic() < deadline and watch.poll() is None:
            time.sleep(0.1)
        assert log.exists(), (tmp_path / "w.log").read_text()
        watch.send_signal(signal.SIGKILL)
        watch.wait(10)
    finally:
        if watch.poll() is None:
            watch.kill()
        pid = int(log.read_text().split()[1])  # the hook outlives the watch: stop it here
        os.killpg(pid, signal.SIGKILL)
    failed = subprocess.run([*base, "--on-advance", slow], capture_output=True, text=True,
                            timeout=60)
    text = " ".join(failed.stderr.split())
    assert failed.returncode == 4, text
    assert "was started but never recorded as finished" in text
    rerun = subprocess.run([*base, "--on-advance", f"echo rerun >> {log}",
                            "--on-unfinished-hook", "rerun"], capture_output=True, text=True,
                           timeout=60)
    assert rerun.returncode == 0, rerun.stderr
    lines = log.read_text().splitlines()
    assert lines[0].startswith("start") and lines[1:] == ["rerun"]
