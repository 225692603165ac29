"""`layergate capacity` end to end against echo servers of known capacity (benchmarks/
echo_server.py --slots: N requests at once, 0.05 s a token, the rest queue): 4 slots against
6 slots, with a second 4-slot server as baseline2. The sweep is killed mid-way and resumed;
the measured ratio must fall within 10 % of the true one (an M/D/c queue, simulated in
tests/support/slots.py) with its interval covering it, and the identical servers' ratio
must cover 1. A second, one-step sweep shows the two cases that are no capacity figure."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from layergate.exporters.catalogue import BASELINE, BASELINE2, CANDIDATE, ExitCode
from layergate.exporters.figures import capacity as cap
from layergate.exporters.figures.slo import parse_slo
from layergate.harness.capacity.report import SINGLE_SWEEP
from layergate.harness.capacity.sweep import step_seed
from layergate.harness.processes import layergate_command
from layergate.harness.sweepdir import REPORT, STATE, SweepDir
from tests.support.echo import echo_server
from tests.support.slots import simulated_step, true_capacity
from tests.support.traffic import traffic

# a sweep is several replays: minutes on two busy cores
pytestmark = [pytest.mark.slow, pytest.mark.locust]

# traffic() asks for 4 tokens: 0.2 s a request (benchmarks/capacity_slots_real.py's servers
# at half the time scale: the same ratio in half the wall time)
TOKEN_S, TOKENS = 0.05, 4
# a request may wait one service time (0.2 s) for a slot: a looser SLO lets the saturation
# detector end the arms first (queueing grows before the SLO is missed)
SLO, LIMIT_S, ATTAINMENT = "ttft:250ms", 0.25, 0.9
SLOTS = {BASELINE: 4, BASELINE2: 4, CANDIDATE: 6}
# steps of 1 s warm-up and 2.5 s measured (5 and 12 service times): a finite step measures
# within a few % of the steady state the truth is computed for; the knee's steps as long as
# the others (--knee-steps 1) keep the sweep short
LADDER = ("--knee-steps", "1", "--start", "10", "--factor", "2", "--bisections", "2",
          "--warmup", "1", "--min-duration", "2.5", "--min-requests", "30", "--max-in-flight", "64",
          "--resamples", "400", "--slo-attainment", str(ATTAINMENT), "--no-progress")


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    with ExitStack() as stack:
        yield {arm: stack.enter_context(echo_server("--token-delay", str(TOKEN_S),
                                                    "--slots", str(n)))
               for arm, n in SLOTS.items()}


def _arm_args(urls: dict[str, str]) -> list[str]:
    return [a for arm, url in urls.items() for a in (f"--{arm}", url)]


def _steps(out: Path) -> int:
    try:
        return len(json.loads((out / STATE).read_text())["steps"])
    except (OSError, ValueError, KeyError):
        return 0


@pytest.fixture(scope="module")
def sweep(servers: dict[str, str], tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[Path, subprocess.CompletedProcess, int]:
    """The sweep, SIGKILLed once two steps are stored, then resumed to its end."""
    tmp = tmp_path_factory.mktemp("capacity")
    out = tmp / "sweep"
    args = ["capacity", "--traffic", str(traffic(tmp / "t.jsonl", 16, 0.1)),
            *_arm_args(servers), "--out", str(out), "--slo", SLO, *LADDER]
    first = subprocess.Popen(layergate_command(*args), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    in_flight = out / "steps" / "002"  # the third step has begun: kill it mid-step
    while not (_steps(out) == 2 and in_flight.is_dir()) and first.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    output = first.communicate()[0]
    assert _steps(out) == 2, output
    resumed = subprocess.run(layergate_command(*[a for a in args if a not in ("--slo", SLO)],
                                               "--resume"),
                             capture_output=True, text=True, timeout=600)
    return out, resumed, 2


def _figure(report: dict, name: str, arm: str) -> dict:
    return next(f for f in report["figures"] if f["name"] == name and f["arm"] == arm)


def _as_run(out: Path) -> float:
    """The true ratio of the steps as run: each stored step's own schedule (load, requests,
    seed) through ideal slot servers, judged and interpolated as the sweep does. It differs
    from the steady state by each step's own Poisson draw and by the finite steps."""
    state = SweepDir(out).read()
    config = state.config
    ideal = [simulated_step(r.arm, r.load, s.requests, SLOTS[r.arm], TOKEN_S, TOKENS,
                            parse_slo(config["slo"]), config["warmup"],
                            step_seed(config["seed"], s.index))
             for s in state.steps for r in s.results]
    caps = {arm: cap.capacity([x for x in ideal if x.arm == arm], ATTAINMENT,
                              config["max_error_rate"]).value for arm in (BASELINE, CANDIDATE)}
    return caps[CANDIDATE] / caps[BASELINE]


def test_four_slots_against_six_measure_the_known_ratio(sweep) -> None:
    out, done, _ = sweep
    assert done.returncode == ExitCode.PASS, done.stdout + done.stderr
    report = json.loads((out / REPORT).read_text())
    true = (true_capacity(6, TOKEN_S * TOKENS, LIMIT_S - TOKEN_S, ATTAINMENT)
            / true_capacity(4, TOKEN_S * TOKENS, LIMIT_S - TOKEN_S, ATTAINMENT))
    assert 1.6 < true < 1.7  # more than 6 / 4: more slots queue less at the same load
    ratio = _figure(report, "capacity_ratio", CANDIDATE)
    as_run = _as_run(out)
    summary = (f"measured {ratio['value']:.3f} [{ratio['ci_low']:.3f}, "
               f"{ratio['ci_high']:.3f}], steady state {true:.3f}, as run {as_run:.3f}")
    print(summary)
    assert ratio["value"] == pytest.approx(true, rel=0.10), summary
    assert as_run == pytest.approx(true, rel=0.10), summary
    # one sweep's interval is its sampling noise only, which covers the truth of its own
    # steps in about three sweeps of four (VALIDITY.md, "Capacity at the SLO"): no single
    # run can be held to covering it, only to saying what it is
    assert ratio["ci_low"] <= ratio["value"] <= ratio["ci_high"], summary
    assert ratio["detail"]["interval"] == SINGLE_SWEEP, summary
    assert "capacity ratio candidate / baseline" in done.stdout
    # every step was preceded by the idle check, and the servers had drained in time
    steps = SweepDir(out).read().steps
    assert all(s.idle_wait_s is not None and not s.busy for s in steps), steps


def test_identical_servers_give_a_ratio_whose_interval_covers_one(sweep) -> None:
    report = json.loads((sweep[0] / REPORT).read_text())
    floor = _figure(report, "capacity_ratio", BASELINE2)
    assert floor["ci_low"] <= 1 <= floor["ci_high"], floor
    assert _figure(report, "capacity_ratio", CANDIDATE)["noise_floor"] == floor["value"]


def test_a_killed_sweep_resumes_where_it_stopped(sweep) -> None:
    out, done, before = sweep
    state = SweepDir(out).read()
    assert state.status == "complete" and len(state.resumes) == 1
    assert [s.index for s in state.steps] == list(range(len(state.steps)))
    assert len(state.steps) > before
    # the step in flight at the kill was sent again from its start; its partial run is kept
    assert (out / "steps" / f"{before:03d}.interrupted").is_dir()
    loads = [s.load for s in state.steps]
    assert len(set(loads)) == len(loads)  # no step was run twice


def test_no_capacity_and_a_lower_bound_are_reported_as_such(servers, tmp_path: Path) -> None:
    """A 25 ms TTFT is missed even unloaded (the first token takes 0.05 s): no capacity,
    not 0. An arm that meets a loose SLO up to --max-load has only a capacity >= it. Both
    exit 3. A sweep stopped by SIGTERM (as by Ctrl-C) is interrupted with its report."""
    arms = _arm_args({BASELINE: servers[BASELINE], CANDIDATE: servers[CANDIDATE]})
    t = traffic(tmp_path / "t.jsonl", 8, 0.1)
    common = ["--traffic", str(t), *arms, "--start", "1", "--max-load", "1", "--warmup",
              "0", "--min-duration", "0", "--min-requests", "5", "--no-progress",
              "--resamples", "50"]

    def capacity(out: str, slo: str, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(layergate_command("capacity", *common, "--out", str(tmp_path / out),
                                                "--slo", slo, *extra),
                              capture_output=True, text=True, timeout=300)

    tight = capacity("tight", "ttft:25ms")
    assert tight.returncode == ExitCode.INCONCLUSIVE, tight.stdout + tight.stderr
    assert "capacity baseline: none (fails the SLO at its lowest step, 1 req/s)" in tight.stdout
    report = json.loads((tmp_path / "tight" / REPORT).read_text())
    assert report["arms"][BASELINE]["capacity"] is None
    assert _figure(report, "capacity_ratio", CANDIDATE)["status"] == "not_computable"
    # SIGTERM (as Ctrl-C) after the first of two steps: interrupted, with a readable report
    loose = tmp_path / "loose"
    cmd = layergate_command("capacity", *common, "--out", str(loose), "--slo", "ttft:5s")
    cmd[cmd.index("--max-load") + 1] = "2"
    running = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while _steps(loose) < 1 and running.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    running.send_signal(signal.SIGTERM)
    _, err = running.communicate(timeout=120)
    assert running.returncode == ExitCode.FAIL and "marked interrupted" in err, err
    partial = json.loads((loose / REPORT).read_text())
    assert partial["status"] == "interrupted" and partial["arms"][BASELINE]["steps"]
    resumed = capacity("loose", "ttft:5s", "--resume")
    assert resumed.returncode == ExitCode.INCONCLUSIVE, resumed.stdout + resumed.stderr
    assert "capacity baseline: >= 2 req/s" in resumed.stdout
    # a resume keeps the sweep's SLO: another one is a usage error
    other = capacity("tight", "ttft:5s", "--resume")
    assert other.returncode == ExitCode.USAGE and "the sweep's SLO is" in other.stderr
