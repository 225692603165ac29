"""A replay spread over Locust's master/worker channel: the master (`layergate replay
--expect-workers N --master-bind ...`) owns the run directory; workers (`layergate
replay-worker --master ...`) run as separate processes, each in its own empty temporary
directory, against real arms (the echo server of benchmarks/). One host, separate
processes and directories: no network namespaces here.

Faults: a worker killed mid-run, a worker frozen until its answers come too late, the last
worker lost, the master killed mid-run and resumed with a fresh worker, a worker that joins
late, a worker with a skewed clock, a name taken twice; and the `should_stop` hook."""

from __future__ import annotations

import contextlib
import csv
import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from layergate.harness.processes import free_port, layergate_command
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.replay.channel_work import SKEW_ENV
from layergate.harness.rundir import RunDir, load_run
from tests.support.replay_rig import (
    Worker,
    completed,
    joined,
    master_cmd,
    pairs,
    rows,
    wait_for,
)
from tests.support.traffic import traffic

pytestmark = [pytest.mark.slow, pytest.mark.locust]


def test_workers_in_empty_dirs_give_the_same_results_as_one_process(
        tmp_path: Path, echo: str) -> None:
    path = traffic(tmp_path / "t.jsonl", 24, spacing=0.1)
    single = tmp_path / "single"
    # closed loop, 2 users a worker: each holds at most a few records, so both send
    run_replay(ReplayConfig(out=single, arms={"baseline": echo, "candidate": echo},
                            traffic=path, users=4, progress=False, timeout=20))
    out, port, metrics_port = tmp_path / "multi", free_port(), free_port()
    master = subprocess.Popen(master_cmd(path, out, echo, port, 2, "--users", "4",
                                         "--metrics-port", str(metrics_port),
                                         "--metrics-linger", "2"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    workers = [Worker(tmp_path / f"w{i}", port) for i in range(2)]
    seen: list[str] = []
    live = ""
    while master.poll() is None:  # what the workers hold open, while they work
        for worker in workers:
            if worker.proc.poll() is None:
                with contextlib.suppress(OSError):
                    seen += worker.open_paths()
                    assert "torch" not in worker.maps(), "a worker loaded torch"
        with contextlib.suppress(httpx.HTTPError):
            live = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=1).text
        time.sleep(0.05)
    output = master.communicate()[0]
    assert master.returncode == 0, output
    for worker in workers:
        log = worker.finish()
        assert worker.proc.returncode == 0, log
        assert not any(worker.home.iterdir()), f"worker wrote into {worker.home}"
    assert seen, "never saw a worker running"
    assert not [p for p in seen if p.startswith(str(out))], "a worker opened the run dir"

    run = load_run(out)
    assert run.manifest.status == "complete" and run.manifest.resent == 0
    assert Counter((r.request_id, r.arm, r.ok) for r in run.results) == Counter(
        (r.request_id, r.arm, r.ok) for r in load_run(single).results)
    assert all(r.ok for r in run.results) and len(run.results) == 48
    names = {w["name"] for w in run.manifest.workers["workers"]}
    assert len(names) == 2
    # sent away as the run ended: stopped, not lost
    assert all(w["stopped"] and not w["lost"] for w in run.manifest.workers["workers"])
    assert not any("lost" in n for n in run.manifest.notes), run.manifest.notes
    with RunDir(out).open_store(create=False) as store:
        assert {row.worker for row in store.rows()} == names, run.manifest.workers
        lateness = [row.recorded_at - row.intended_at - row.result.e2e_s
                    for row in store.rows()]
    assert max(abs(x) for x in lateness) < 0.5, "intended times are not the master's"
    # the master's live metrics (last scrape, while it lingered) and Locust's stats cover
    # both workers
    served = sum(float(line.rpartition(" ")[2]) for line in live.splitlines()
                 if line.startswith("layergate_replay_requests_total{"))
    assert served == 48, live
    with RunDir(out).locust_stats.open() as stats:
        posts = [row for row in csv.DictReader(stats) if row["Type"] == "POST"]
    assert sum(int(row["Request Count"]) for row in posts) == 48


def two_workers_one_holding(tmp_path: Path, out: Path, echo: str, n: int
                            ) -> tuple[subprocess.Popen, dict[str, Worker], str]:
    """A master with two workers on n records, once the first results are in and one
    worker holds at least two records (whichever asks first gets them): that one's name."""
    path = traffic(tmp_path / "t.jsonl", n, spacing=0.1)
    port = free_port()
    master = subprocess.Popen(master_cmd(path, out, echo, port, 2), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    workers = {name: Worker(tmp_path / name, port, name=name) for name in ("w1", "w2")}
    holding: list[str] = []

    def one_holds_records() -> bool:
        with RunDir(out).open_store(create=False) as store:
            holding[:] = [name for name, k in store.queue.holders().items() if k >= 2]
        return rows(out) >= 10 and bool(holding)

    wait_for(one_holds_records, what="a worker holding records after the first results")
    return master, workers, holding[0]


def test_a_worker_killed_mid_run_loses_nothing_and_counts_nothing_twice(
        tmp_path: Path, echo: str) -> None:
    out = tmp_path / "run"
    master, workers, victim = two_workers_one_holding(tmp_path, out, echo, 40)
    workers.pop(victim).proc.send_signal(signal.SIGKILL)
    run = completed(master, workers, out, 80)
    assert run.manifest.resent > 0, "the victim held records: they should be sent again"
    victim_info = next(w for w in run.manifest.workers["workers"] if w["name"] == victim)
    assert victim_info["lost"] is not None and victim_info["released"] > 0
    assert any(f"{victim} was lost" in n for n in run.manifest.notes)
    assert any("sent again" in n for n in run.manifest.notes)
    # the master records the open loop's limit over both workers (256 splits evenly)
    assert run.manifest.in_flight_limit == ReplayConfig.max_in_flight == 256


def test_the_late_results_of_a_worker_presumed_lost_are_dropped(
        tmp_path: Path, echo: str) -> None:
    out = tmp_path / "run"
    master, workers, victim = two_workers_one_holding(tmp_path, out, echo, 90)
    workers[victim].proc.send_signal(signal.SIGSTOP)  # frozen: no heartbeat, no results

    def released() -> bool:
        info = {w["name"]: w for w in (RunDir(out).read_workers() or {})["workers"]}
        return info[victim]["lost"] is not None and info[victim]["released"] > 0

    wait_for(released, what="the master to give the frozen worker's records to another")
    time.sleep(1.0)  # the other worker sends them again meanwhile
    workers[victim].proc.send_signal(signal.SIGCONT)  # its answers now come too late
    run = completed(master, workers, out, 180)
    assert run.manifest.resent > 0
    assert run.manifest.workers["late_results_dropped"] > 0, run.manifest.workers
    assert any("late result(s) dropped" in n for n in run.manifest.notes)


def test_a_worker_that_joins_late_gets_users_and_work(tmp_path: Path, echo: str) -> None:
    # 80 records of ~0.2 s on 2 users: ~8 s, time for a late worker to start on a busy host
    path = traffic(tmp_path / "t.jsonl", 80, spacing=0.1)
    out, port = tmp_path / "run", free_port()
    # closed loop, 2 users: once Locust moves one to the late worker, it must send
    master = subprocess.Popen(master_cmd(path, out, echo, port, 1, "--users", "2"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    early = Worker(tmp_path / "early", port, name="early")
    wait_for(lambda: rows(out) >= 6, what="the first results")
    late = Worker(tmp_path / "late", port, name="late")
    run = completed(master, {"early": early, "late": late}, out, 160)
    info = {w["name"]: w for w in run.manifest.workers["workers"]}
    assert info["late"]["late"] and not info["early"]["late"]
    assert any("worker late joined" in n for n in run.manifest.notes), run.manifest.notes
    # Locust moved users to it (stopping some on the early worker, mid-wait or mid-send):
    # still one result per pair, above
    assert info["late"]["records"] > 0


def test_the_last_worker_lost_ends_the_run_interrupted(tmp_path: Path, echo: str) -> None:
    path = traffic(tmp_path / "t.jsonl", 40, spacing=0.1)
    out, port = tmp_path / "run", free_port()
    master = subprocess.Popen(master_cmd(path, out, echo, port, 1), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    only = Worker(tmp_path / "only", port, name="only")
    wait_for(lambda: rows(out) >= 4, what="the first results")
    only.proc.send_signal(signal.SIGKILL)
    output = master.communicate(timeout=60)[0]
    assert master.returncode == 1, output
    run = load_run(out)
    assert run.manifest.status == "interrupted"
    assert set(pairs(out).values()) == {1} and len(pairs(out)) < 80
    assert any("only was lost" in n for n in run.manifest.notes), run.manifest.notes


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, "interrupted"),
                                             (signal.SIGKILL, "running")])
def test_the_master_killed_mid_run_then_resume_with_a_fresh_worker(
        tmp_path: Path, echo: str, sig: signal.Signals, status: str) -> None:
    path = traffic(tmp_path / "t.jsonl", 30, spacing=0.2)
    out, port = tmp_path / "run", free_port()
    master = subprocess.Popen(master_cmd(path, out, echo, port, 1), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    first = Worker(tmp_path / "first", port)
    wait_for(lambda: rows(out) >= 10, what="the first results")
    master.send_signal(sig)  # SIGKILL: Locust's master goes with it (parent-death signal)
    output = master.communicate(timeout=60)[0]
    assert master.returncode == (1 if sig == signal.SIGTERM else -signal.SIGKILL), output
    first.finish()
    manifest = RunDir(out).read_manifest()
    assert manifest.status == status  # a SIGKILL leaves no chance to write `interrupted`
    before = pairs(out)
    assert 10 <= sum(before.values()) < 60
    with RunDir(out).open_store(create=False) as store:
        kept = {(r.result.request_id, r.result.arm): r.recorded_at for r in store.rows()}

    port = free_port()
    master = subprocess.Popen(master_cmd(None, out, echo, port, 1), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    fresh = Worker(tmp_path / "fresh", port, name="fresh")
    output = master.communicate(timeout=120)[0]
    fresh.finish()
    assert master.returncode == 0, output
    run = load_run(out)
    assert run.manifest.status == "complete"
    assert set(pairs(out).values()) == {1} and len(pairs(out)) == 60
    with RunDir(out).open_store(create=False) as store:
        after = {(r.result.request_id, r.result.arm): r.recorded_at for r in store.rows()}
    assert all(after[key] == at for key, at in kept.items()), "a done pair was sent again"
    assert "fresh" in {w["name"] for w in run.manifest.workers["workers"]}


def test_clock_skew_is_corrected_or_refused_and_a_taken_name_is_refused(
        tmp_path: Path, echo: str) -> None:
    path = traffic(tmp_path / "t.jsonl", 20, spacing=0.15)
    out, port = tmp_path / "run", free_port()
    master = subprocess.Popen(master_cmd(path, out, echo, port, 2, "--max-clock-skew", "10"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # while the master waits for its second worker: the refused ones never get users
    skewed = Worker(tmp_path / "skewed", port, name="skewed", env={SKEW_ENV: "4"})
    wait_for(lambda: "skewed" in joined(out), what="the skewed worker to join")
    twin = Worker(tmp_path / "twin", port, name="skewed")
    far = Worker(tmp_path / "far", port, name="far", env={SKEW_ENV: "-500"})
    twin_log, far_log = twin.finish(), far.finish()
    assert twin.proc.returncode == 2 and "is taken by a connected worker" in twin_log, twin_log
    assert far.proc.returncode == 2 and "its clock is +50" in far_log, far_log
    other = Worker(tmp_path / "other", port, name="other")
    run = completed(master, {"skewed": skewed, "other": other}, out, 40)
    assert all(r.ok for r in run.results)
    # measured from the master's intended times: a 4 s skew left uncorrected would show
    assert max(r.e2e_s for r in run.results) < 3.0  # uncorrected: ~4.2 s
    info = next(w for w in run.manifest.workers["workers"] if w["name"] == "skewed")
    assert abs(info["clock_offset_s"] + 4) < 0.5
    # the run started only once both accepted workers were in (the refused ones never
    # counted); which of them sent what is up to who asks first (a short, light run may go
    # all to one), so the start is checked, not the split
    summary = RunDir(out).read_workers()
    accepted = {w["name"]: w for w in summary["workers"]}
    assert set(accepted) == {"skewed", "other"}
    assert summary["started"] >= max(w["joined"] for w in accepted.values())
    assert sum(w["records"] for w in accepted.values()) == 20
    with RunDir(out).open_store(create=False) as store:
        assert {row.worker for row in store.rows()} <= {"skewed", "other"}
    refused = [r["reason"] for r in run.manifest.workers["refused"]]
    assert len(refused) == 2
    assert sum("worker refused" in n for n in run.manifest.notes) == 2


def test_should_stop_ends_the_run_early_and_complete(tmp_path: Path, echo: str) -> None:
    path = traffic(tmp_path / "t.jsonl", 60, spacing=0.1)
    out = tmp_path / "run"
    asked: list[int] = []

    def after_ten(results) -> str | None:
        asked.append(len(results))
        return "10 results are enough" if len(results) >= 10 else None

    run_replay(ReplayConfig(out=out, arms={"baseline": echo, "candidate": echo},
                            traffic=path, progress=False, timeout=20), should_stop=after_ten)
    run = load_run(out)
    assert asked and run.manifest.status == "complete"
    assert run.manifest.stopped_early and run.manifest.stop_reason == "10 results are enough"
    # the local worker was sent away by the early stop, not lost
    assert not any("lost" in n for n in run.manifest.notes), run.manifest.notes
    done = pairs(out)
    assert set(done.values()) == {1}
    assert 10 <= sum(done.values()) < 120
    # drained: every record handed out has every arm's result
    assert all(done[(rid, "candidate")] == 1 for rid, _ in done)


def test_until_decided_stops_once_the_policy_is_decided(tmp_path: Path, echo: str) -> None:
    """`replay --until-decided POLICY` end to end: identical arms pass an exact-match rule
    long before the traffic runs out, sending stops, every request sent has every arm's
    result, and `gate --sequential` on the stored run gives the same verdict."""
    policy = tmp_path / "match.yaml"
    policy.write_text("name: match\nmin_samples: 20\nmetrics:\n"
                      "  exact_match:\n    direction: '>='\n    threshold: 0.5\n")
    path = traffic(tmp_path / "t.jsonl", 200, spacing=0.05)
    out = tmp_path / "run"
    replay = subprocess.run(
        layergate_command("replay", "--traffic", str(path), "--baseline", echo, "--candidate",
                          echo, "--out", str(out), "--processes", "1", "--no-progress",
                          "--timeout", "20", "--until-decided", str(policy)),
        capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    manifest = RunDir(out).read_manifest()
    assert manifest.status == "complete" and manifest.stopped_early
    assert manifest.stop_reason.startswith("sequential verdict pass after ")
    done = pairs(out)
    sent = {rid for rid, _ in done}
    assert 20 <= len(sent) < 200
    assert set(done.values()) == {1} and len(done) == 2 * len(sent)
    gate = subprocess.run(layergate_command("gate", str(out), "--sequential", "--policy",
                                            str(policy)),
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 0, gate.stdout + gate.stderr


def test_own_mode_across_workers_keeps_each_conversation_on_one_worker(
        tmp_path: Path, echo: str) -> None:
    """`--conversation-mode own` spread over two workers: a conversation is one unit of
    work, so every turn of it, every arm's, is sent by the one worker that claimed it, and
    each arm's later turns hold its own earlier answers (the echo's, longer than the
    recorded replies)."""
    path = tmp_path / "chats.jsonl"
    with path.open("w") as fh:
        for c in range(6):
            messages = [{"role": "user", "content": f"conversation {c} opens here"}]
            for t in range(3):
                fh.write(json.dumps({
                    "id": f"c{c}-t{t + 1}", "offset_s": c * 0.1 + t * 0.3, "scenario": "chat",
                    "endpoint": "/v1/chat/completions",
                    "body": {"messages": messages, "max_tokens": 4}}) + "\n")
                messages = [*messages, {"role": "assistant", "content": "ok"},
                            {"role": "user", "content": f"then {t}"}]
    out, port = tmp_path / "multi", free_port()
    # two conversations in flight: one Locust user a worker, so both workers hold some
    master = subprocess.Popen(master_cmd(path, out, echo, port, 2, "--conversation-mode",
                                         "own", "--max-in-flight", "2", "--metrics-linger", "0"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    workers = {name: Worker(tmp_path / name, port, name=name) for name in ("w1", "w2")}
    run = completed(master, workers, out, 36)
    assert run.manifest.config["conversation_mode"] == "own"
    assert all(r.ok for r in run.results)
    with RunDir(out).open_store(create=False) as store:
        senders: dict[str, set[str]] = {}
        for row in store.rows():
            senders.setdefault(row.result.request_id.split("-")[0], set()).add(row.worker)
    assert all(len(names) == 1 for names in senders.values()), senders
    assert set().union(*senders.values()) == {"w1", "w2"}  # both workers held some
    prompt = {(r.request_id, r.arm): r.prompt_tokens for r in run.results}
    assert all(prompt[(f"c{c}-t3", "baseline")] == prompt[(f"c{c}-t3", "candidate")]
               for c in range(6))
