"""One live-canary run on real engines, for tests and benchmarks: a real Prometheus scraping
two engines and a shadow replay, and two `layergate watch --serve` processes reading it:

- client side (`--engine layergate-replay`: the replayer's per-arm histograms), which sees
  what a proxy in front of the candidate does;
- engine side (`--engine layergate`: the engines' own histograms, `arm` from the scrape
  config), which does not: behind a proxy the engines stay what they are.

Both arms go through a `DelayProxy` (so its own overhead is the same for both); with
`slowdown`, the candidate's starts stretching responses by that share once the client-side
watch has read `turn_after` windows with data.
"""

from __future__ import annotations

import dataclasses
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from layergate.exporters.traffic import read_traffic, write_traffic
from layergate.harness.processes import free_port, layergate_command
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus import start_prometheus
from layergate.harness.stack.prometheus_config import ScrapeTargets

from .delay_proxy import DelayProxy

ROOT = Path(__file__).resolve().parents[2]
SELECTORS = ("--baseline", 'arm="baseline"', "--candidate", 'arm="candidate"')


@dataclass(frozen=True)
class Rig:
    window_s: float = 5.0
    requests: int = 36  # short prompts, a few tokens: an engine busy half the time at most
    gap_s: float = 2.0
    max_tokens: int = 3
    policy: dict | None = None  # a watch policy, as YAML data
    client_min_windows: int = 4
    engine_min_windows: int = 8  # the engine-side watch must look at many windows
    turn_after: int = 3  # client-side windows with data before the candidate turns slow
    timeout_s: float = 180.0


@dataclass(frozen=True)
class RigResult:
    client: dict  # /status of the client-side watch when it decided (or at the end)
    engine: dict  # /status of the engine-side watch at the end of the replay
    turned_at: int | None  # client-side windows with data when the candidate turned slow
    turn_to_decision_s: float | None
    client_code: int | None
    workdir: Path

    def log(self, side: str) -> str:
        return (self.workdir / f"{side}.log").read_text(errors="replace")

    def hooks(self, side: str) -> list[str]:
        path = self.workdir / f"{side}.hooks"
        return path.read_text().splitlines() if path.exists() else []


def _traffic(rig: Rig, path: Path) -> Path:
    records = [r for r in read_traffic(ROOT / "scenarios" / "traffic" / "eval.jsonl").records
               if r.scenario == "short"][:rig.requests]
    return write_traffic(path, [dataclasses.replace(r, offset_s=rig.gap_s * i, body={
        **r.body, "max_tokens": rig.max_tokens}) for i, r in enumerate(records)])


def _watch(rig: Rig, prom: str, engine: str, side: str, port: int, work: Path,
           min_windows: int) -> subprocess.Popen:
    hook = f'echo "$LAYERGATE_WATCH_DECISION $LAYERGATE_WATCH_STAGE" >> {work}/{side}.hooks'
    cmd = layergate_command("watch", "--prometheus", prom, "--engine", engine, *SELECTORS,
                            "--stages", "50,100", "--window", f"{rig.window_s:g}s", "--lag", "1.5s",
                            "--min-windows", str(min_windows), "--max-windows", "200",
                            "--no-data-windows", "6", "--serve", str(port), "--on-rollback", hook,
                            "--on-advance", hook, "--json", str(work / f"{side}.json"))
    if rig.policy is not None:
        (work / "policy.yaml").write_text(yaml.safe_dump(rig.policy))
        cmd += ["--policy", str(work / "policy.yaml")]
    return subprocess.Popen(cmd, stdout=(work / f"{side}.log").open("w"),
                            stderr=subprocess.STDOUT)


def status(port: int) -> dict:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/status", timeout=5).json()
    except httpx.HTTPError:
        return {"windows": 0, "verdict": "pending", "state": "starting"}


def run_rig(rig: Rig, baseline_url: str, candidate_url: str, work: Path,
            slowdown: float | None) -> RigResult:
    """One replay through both arms, watched from both sides; `slowdown` None: an A/A run."""
    work.mkdir(parents=True, exist_ok=True)
    replay_port, client_port, engine_port = free_port(), free_port(), free_port()
    procs = ProcessSet(work / "logs")
    watches: list[subprocess.Popen] = []
    turned_at = turn_time = decided_time = None
    with DelayProxy(baseline_url, 0.0) as same, DelayProxy(candidate_url, 0.0) as proxy:
        try:
            prom = start_prometheus(procs, ScrapeTargets(
                engines={"baseline": baseline_url, "candidate": candidate_url},
                replayer=[f"127.0.0.1:{replay_port}"]), work / "prom")
            if not prom.wait_for('count(up{job="layergate-engine"} == 1) == 2', 30):
                raise RuntimeError("Prometheus did not scrape both engines within 30 s")
            config = ReplayConfig(out=work / "run", traffic=_traffic(rig, work / "t.jsonl"),
                                  arms={"baseline": same.url, "candidate": proxy.url},
                                  metrics_port=replay_port, max_in_flight=64, progress=False,
                                  metrics_linger_s=2 * rig.window_s)
            replay = threading.Thread(target=run_replay, args=(config,), daemon=True)
            replay.start()
            watches = [_watch(rig, prom.url, "layergate-replay", "client", client_port, work,
                              rig.client_min_windows),
                       _watch(rig, prom.url, "layergate", "engine", engine_port, work,
                              rig.engine_min_windows)]
            deadline = time.monotonic() + rig.timeout_s
            if slowdown is not None:
                while status(client_port)["windows"] < rig.turn_after \
                        and time.monotonic() < deadline:
                    time.sleep(0.5)
                turned_at, turn_time = status(client_port)["windows"], time.monotonic()
                proxy.extra = slowdown
            while status(client_port)["verdict"] == "pending" and replay.is_alive() \
                    and time.monotonic() < deadline:
                time.sleep(0.5)
            decided_time = time.monotonic()
            client = status(client_port)
            proxy.extra = 0.0  # the rest of the replay need not wait for a slow arm
            replay.join(rig.timeout_s)
            engine = status(engine_port)
        finally:
            for w in watches:
                w.terminate()
                w.wait(30)
            procs.close()
    took = None if turn_time is None or client["verdict"] == "pending" \
        else decided_time - turn_time
    return RigResult(client, engine, turned_at, took,
                     watches[0].returncode if watches else None, work)
