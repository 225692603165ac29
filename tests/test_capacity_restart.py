"""`capacity --replicates R --restart CMD`: the command runs before each replicate, the sweep
waits for the arms to come back (through their 503s while loading), a command that fails or
an arm that stays down ends it, and the interval across restarted replicates takes the
processes' spread from the replicates' own (the signed-rank interval) instead of the
--process-spread prior."""

from __future__ import annotations

import dataclasses
import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from layergate.exporters.catalogue import BASELINE, CANDIDATE, CAPACITY_RATIO, COMPLETE, ExitCode
from layergate.exporters.figures.capacity_replicates import replicated_ratio, restarted_ratio
from layergate.exporters.figures.capacity_step import StepArm
from layergate.harness.capacity.config import CapacityConfig
from layergate.harness.capacity.replicates import (
    replicate_config,
    replicates_exit,
    replicates_lines,
    run_replicates,
)
from layergate.harness.capacity.restart import RestartFailed, restart_arms
from layergate.harness.processes import free_port
from layergate.harness.replay.settings import ConfigError
from layergate.harness.sweepdir import Step, SweepDir, SweepState
from tests.support.http_server import serving

LOADING_GETS = 1  # a restarted arm answers 503 to this many probes first


class Server:
    """An arm that restarts on POST /restart: it then answers 503 (loading) for a while."""

    def __init__(self) -> None:
        self.restarts = 0
        self.loading = 0
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        arm = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                with arm.lock:
                    arm.restarts += 1
                    arm.loading = LOADING_GETS
                self._answer(200)

            def do_GET(self) -> None:  # noqa: N802
                with arm.lock:
                    status = 503 if arm.loading else 200
                    arm.loading = max(0, arm.loading - 1)
                self._answer(status)

            def _answer(self, status: int) -> None:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@pytest.fixture()
def arm() -> Iterator[tuple[Server, str]]:
    server = Server()
    with serving(server.handler()) as url:
        yield server, url.rstrip("/")


def _restart_command(url: str) -> str:
    post = f"import urllib.request; urllib.request.urlopen({url + '/restart'!r}, data=b'')"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(post)}"


def _config(tmp_path: Path, url: str, **extra) -> CapacityConfig:
    return CapacityConfig(out=tmp_path / "sweep", arms={BASELINE: url, CANDIDATE: url},
                          slo="ttft:1s", traffic=tmp_path / "t.jsonl", replicates=6,
                          resamples=20, **extra)


def _step(arm: str, load: float, met: int, n: int = 60) -> StepArm:
    return StepArm(arm, load, (True,) * met + (False,) * (n - met), 0, n / load)


def _sweep_of(candidate_top: int):
    """A `run` for run_replicates that stores a complete two-step sweep, the candidate's
    second step meeting the SLO on `candidate_top` of 60 requests (so its ratio differs
    by replicate); it records the server's restarts and loading as it starts."""
    seen: list[tuple[int, int]] = []

    def run(sub: CapacityConfig, server: Server) -> None:
        seen.append((server.restarts, server.loading))
        met = candidate_top + int(sub.out.name[-2:])
        state = SweepState(sub.to_json(), status=COMPLETE)
        state.steps = [Step(0, 2, (BASELINE, CANDIDATE), 60, 1.0,
                            (_step(BASELINE, 2, 60), _step(CANDIDATE, 2, 60))),
                       Step(1, 4, (BASELINE, CANDIDATE), 60, 1.0,
                            (_step(BASELINE, 4, 30), _step(CANDIDATE, 4, met)))]
        SweepDir(sub.out).write(state)

    return run, seen


def test_each_replicate_runs_on_restarted_arms_and_drops_the_prior(arm, tmp_path) -> None:
    server, url = arm
    config = _config(tmp_path, url, restart=_restart_command(url), restart_timeout=30)
    run, seen = _sweep_of(40)
    lines: list[str] = []
    report = run_replicates(config, lambda sub: run(sub, server), echo=lines.append)
    # restarted before every replicate, and each began only once the arm answered again
    assert seen == [(i, 0) for i in range(1, 7)]
    assert len(lines) == 6 and all("arms restarted" in line for line in lines)
    assert report["restarted"] and report["process_spread"] == 0.0
    ratios = [r["ratio"] for r in report["replicates"]]
    assert len(set(ratios)) == 6
    got, expected = report["capacity_ratio"], restarted_ratio(ratios)
    assert got["method"] == "signed-rank" and got["confidence"] == pytest.approx(0.96875)
    assert got["ci_low"] == pytest.approx(expected.low)
    assert got["ci_low"] == pytest.approx(min(ratios))  # 6 draws: [min, max] at 96.9 %
    assert "restarted arms" in replicates_lines(report)[-2]
    # without restarts the same ratios carry the prior's term
    assert replicated_ratio(ratios, config.process_spread).method == "t"


def test_too_few_restarted_replicates_give_no_interval(arm, tmp_path) -> None:
    server, url = arm
    config = _config(tmp_path, url, restart=_restart_command(url), restart_timeout=30)
    run, _ = _sweep_of(40)
    run_replicates(config, lambda sub: run(sub, server), echo=lambda _: None)
    fewer = CapacityConfig(**{**vars(config), "replicates": 5, "restart": ""})
    from layergate.harness.capacity.replicates import replicates_report
    report = replicates_report(fewer)
    assert report["restarted"] and report["capacity_ratio"] is None
    assert "needs 6 on restarted arms" in report["why"]


def test_without_restart_the_prior_stands(arm, tmp_path) -> None:
    server, url = arm
    run, seen = _sweep_of(40)
    report = run_replicates(_config(tmp_path, url), lambda sub: run(sub, server))
    assert seen == [(0, 0)] * 6 and not report["restarted"]
    assert report["process_spread"] == 0.02
    assert "between-process tau 0.02" in replicates_lines(report)[-2]


def test_a_failing_restart_or_an_arm_that_stays_down_ends_the_sweep(arm) -> None:
    _, url = arm
    with pytest.raises(RestartFailed, match="exited 3: gone"):
        restart_arms("echo gone >&2; exit 3", {BASELINE: url}, 10)
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RestartFailed, match=f"{CANDIDATE}: .*{dead}"):
        restart_arms("true", {BASELINE: url, CANDIDATE: dead}, 1.5)
    with pytest.raises(RestartFailed, match="did not end within"):
        restart_arms("sleep 5", {BASELINE: url}, 0.5)
    assert RestartFailed("x").exit_code == 4  # infrastructure


def test_the_config_refuses_a_restart_with_too_few_replicates(tmp_path) -> None:
    # the config's rule, so the Python API and a resumed sweep hold it as the CLI does
    url = "http://127.0.0.1:1"
    with pytest.raises(ConfigError, match="--replicates 6 or more"):
        dataclasses.replace(_config(tmp_path, url), restart="true", replicates=5)
    run = _config(tmp_path, url, restart="true")
    # each replicate records that it is one of 6, restarted: a valid config of its own
    assert all(replicate_config(run, i).restart == "true" for i in range(6))
    assert replicates_exit({"replicates": [], CAPACITY_RATIO: None}) == ExitCode.INCONCLUSIVE
    assert replicates_exit({"replicates": [], CAPACITY_RATIO: {"value": 1.1}}) == ExitCode.PASS


def test_restart_needs_replicates(tmp_path) -> None:
    from click.testing import CliRunner

    from layergate.harness.cli import main

    got = CliRunner().invoke(main, [
        "capacity", "--traffic", str(tmp_path / "t.jsonl"), "--baseline", "http://127.0.0.1:1",
        "--candidate", "http://127.0.0.1:2", "--out", str(tmp_path / "s"), "--slo", "ttft:1s",
        "--restart", "true", "--replicates", "5"])
    assert got.exit_code == 2 and "--replicates 6 or more" in got.output
