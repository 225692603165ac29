"""A replay that meets what unattended runs meet: arms that are not there (refused before
anything is sent), an arm that dies mid-run (the circuit breaker stops the run, `--resume`
finishes it), a candidate that fails every request (`--until-decided` decides fail within
a few), workers that must be accepted before the run starts, and workers that must hold
the run's token. The arms are the echo server of benchmarks/ and a server that answers
every request with HTTP 500."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.harness.cli import main
from layergate.harness.processes import free_port, layergate_command
from layergate.harness.replay.breaker import DEFAULT_LIMIT
from layergate.harness.replay.channel_work import SKEW_ENV
from layergate.harness.rundir import RunDir, load_run
from tests.support.replay_rig import (
    Worker,
    completed,
    master_cmd,
    pairs,
    rows,
    start_echo,
    wait_for,
)
from tests.support.stream_server import stream_server
from tests.support.traffic import traffic

pytestmark = [pytest.mark.slow, pytest.mark.locust]

TOKEN = "a1b2c3d4e5f60718293a4b5c6d7e8f90"  # the test's worker token


def test_an_arm_that_is_not_there_is_refused_before_anything_is_sent(
        tmp_path: Path, echo: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "run"
    result = CliRunner().invoke(main, [
        "replay", "--scenario", "smoke", "--baseline", echo, "--candidate", closed,
        "--out", str(out), "--no-progress", "--preflight-timeout", "3"])
    assert result.exit_code == 4, result.output
    assert "candidate" in result.output and "nothing sent" in result.output
    assert "baseline:" not in result.output  # the arm that answers is not named
    assert not out.exists(), "a refused replay made a run directory"


def test_the_master_warns_when_it_listens_beyond_loopback_without_a_token(
        tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    result = subprocess.run(layergate_command(
        "replay", "--scenario", "smoke", "--baseline", closed, "--candidate", closed,
        "--out", str(tmp_path / "run"), "--processes", "0", "--expect-workers", "1",
        "--master-bind", f"0.0.0.0:{free_port()}", "--no-progress",
        "--preflight-timeout", "2"), capture_output=True, text=True, timeout=60)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "no worker token" in result.stderr and "receive the traffic's records" in \
        result.stderr, result.stderr


def test_an_arm_killed_mid_run_trips_the_breaker_and_resume_completes(
        tmp_path: Path, echo: str) -> None:
    port = free_port()
    candidate = start_echo(port)
    path = traffic(tmp_path / "t.jsonl", 80, spacing=0.1)
    out = tmp_path / "run"
    cmd = layergate_command("replay", "--traffic", str(path), "--baseline", echo, "--candidate",
                            f"http://127.0.0.1:{port}", "--out", str(out), "--no-progress",
                            "--timeout", "20")
    replay = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: rows(out) >= 10, what="the first results")
    finally:
        candidate.stop(sig=signal.SIGKILL)
    output = replay.communicate(timeout=120)[0]
    assert replay.returncode == 4, output
    assert f"the candidate arm's last {DEFAULT_LIMIT} requests all failed to connect" in output
    run = load_run(out)
    assert run.manifest.status == "interrupted"
    assert any("circuit breaker" in n for n in run.manifest.notes)
    sent = {rid for rid, _ in pairs(out)}
    assert len(sent) < 80, "the breaker let the whole trace go out"

    candidate = start_echo(port)
    try:
        resumed = subprocess.run(layergate_command(
            "replay", "--resume", "--baseline", echo, "--candidate", f"http://127.0.0.1:{port}",
            "--out", str(out), "--no-progress", "--timeout", "20"),
            capture_output=True, text=True, timeout=120)
    finally:
        candidate.stop(sig=signal.SIGKILL)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    run = load_run(out)
    assert run.manifest.status == "complete"
    with RunDir(out).open_store(create=False) as store:
        ok = {(r.request_id, r.arm) for r in store.results() if r.ok}
    assert len(ok) == 160, "every (request, arm) ends with an ok result after the resume"


def test_until_decided_fails_a_candidate_that_fails_every_request_within_k(
        tmp_path: Path, echo: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("name: errors\nmin_samples: 20\nmax_error_rate: {default: 0.01}\n"
                      "metrics:\n  exact_match: {direction: '>=', threshold: 0.5}\n")
    path = traffic(tmp_path / "t.jsonl", 60, spacing=0.3)
    out = tmp_path / "run"
    with stream_server() as server:  # answers /v1/models and every request with a 500
        broken = f"{server.url}/status/500"
        replay = subprocess.run(layergate_command(
            "replay", "--traffic", str(path), "--baseline", echo, "--candidate", broken,
            "--out", str(out), "--no-progress", "--timeout", "20",
            "--until-decided", str(policy)), capture_output=True, text=True, timeout=120)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    manifest = RunDir(out).read_manifest()
    assert manifest.stopped_early and manifest.stop_reason.startswith(
        "sequential verdict fail after "), manifest.stop_reason
    sent = {rid for rid, _ in pairs(out)}
    assert len(sent) <= DEFAULT_LIMIT, f"{len(sent)} requests sent to a candidate that " \
        "failed every one"
    gate = CliRunner().invoke(main, ["gate", str(out), "--policy", str(policy),
                                     "--sequential"])
    assert gate.exit_code == 1, gate.output
    assert "error_rate: " in gate.output


def test_refused_workers_never_count_toward_the_start(tmp_path: Path, echo: str) -> None:
    path = traffic(tmp_path / "t.jsonl", 20, spacing=0.1)
    out, port = tmp_path / "run", free_port()
    master = subprocess.Popen(master_cmd(path, out, echo, port, 1), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    far = Worker(tmp_path / "far", port, name="far", env={SKEW_ENV: "-500"})
    far_log = far.finish()
    assert far.proc.returncode == 2 and "its clock is +50" in far_log, far_log
    summary = RunDir(out).read_workers() or {}
    assert summary.get("started") is None and rows(out) == 0, \
        "the run started on a refused worker"
    good = Worker(tmp_path / "good", port, name="good")
    run = completed(master, {"good": good}, out, 40)
    assert [w["name"] for w in run.manifest.workers["workers"]] == ["good"]
    assert [r["name"] for r in run.manifest.workers["refused"]] == ["far"]
    assert run.manifest.workers["workers"][0]["stopped"] is not None
    assert not any("lost" in n for n in run.manifest.notes), run.manifest.notes


def test_too_few_accepted_workers_in_time_is_exit_4_naming_them(
        tmp_path: Path, echo: str) -> None:
    path = traffic(tmp_path / "t.jsonl", 10, spacing=0.1)
    out, port = tmp_path / "run", free_port()
    cmd = [*master_cmd(path, out, echo, port, 2)]
    cmd[cmd.index("--worker-wait") + 1] = "12"
    master = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    one = Worker(tmp_path / "one", port, name="one")
    far = Worker(tmp_path / "far", port, name="far", env={SKEW_ENV: "-500"})
    assert "its clock" in far.finish()
    output = master.communicate(timeout=90)[0]
    one.finish()
    assert master.returncode == 4, output
    assert "1 of 2 expected worker(s) joined" in output
    assert "joined: one" in output and "refused: far" in output
    assert rows(out) == 0


def test_only_workers_with_the_token_get_work_and_the_token_is_written_nowhere(
        tmp_path: Path, echo: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    wrong = tmp_path / "wrong"
    wrong.write_text("x" * len(TOKEN))
    path = traffic(tmp_path / "t.jsonl", 20, spacing=0.1)
    out, port = tmp_path / "run", free_port()
    master = subprocess.Popen(master_cmd(path, out, echo, port, 1, "--worker-token-file",
                                         str(token_file)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    intruders = {"bare": Worker(tmp_path / "bare", port, name="bare"),
                 "guess": Worker(tmp_path / "guess", port, name="guess",
                                 args=("--worker-token-file", str(wrong)))}
    logs = {name: w.finish() for name, w in intruders.items()}
    assert intruders["bare"].proc.returncode == 2 and "has no worker token" in logs["bare"]
    assert intruders["guess"].proc.returncode == 2 and "wrong worker token" in logs["guess"]
    good = Worker(tmp_path / "good", port, name="good", env={"LAYERGATE_WORKER_TOKEN": TOKEN})
    output = master.communicate(timeout=120)[0]
    logs["good"] = good.finish()
    assert master.returncode == 0, output
    run = load_run(out)
    assert run.manifest.status == "complete" and len(run.results) == 40
    assert {w["name"] for w in run.manifest.workers["workers"]} == {"good"}
    assert sorted(r["name"] for r in run.manifest.workers["refused"]) == ["bare", "guess"]
    with RunDir(out).open_store(create=False) as store:
        assert {row.worker for row in store.rows()} == {"good"}
    # nowhere: not in a file of the run directory, not in any process's output
    for file in (p for p in out.rglob("*") if p.is_file()):
        assert TOKEN.encode() not in file.read_bytes(), f"the token is in {file}"
    for name, text in {"master": output, **logs}.items():
        assert TOKEN not in text, f"the token is in the {name}'s output"
