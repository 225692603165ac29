"""`replay --until-decided` with three candidates against echo arms, one of them answering
other words: that one is decided (fail) within a few requests and is sent nothing more,
while the two that echo as the baseline does go on to their own decision (pass). The
replay is killed once the broken candidate has stopped and resumed: the resume sends it
nothing, and its missing answers are neither missing nor errors to the gate."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.exporters.catalogue import FAIL, PASS
from layergate.harness.cli import main
from layergate.harness.gate.fixed.family import evaluate_family
from layergate.harness.gate.policy import load_policy
from layergate.harness.processes import layergate_command
from layergate.harness.rundir import RunDir, load_run
from tests.support.replay_rig import family, pairs, wait_for
from tests.support.traffic import traffic

pytestmark = [pytest.mark.slow, pytest.mark.locust]

N = 120  # records, 0.05 s apart
# all-matching answers clear 0.9 after 60 requests at the three candidates' level
# (1 - 0.05/3); all-different ones are below it after 5 (min_samples)
PASS_AFTER = 60
POLICY = """\
name: stop-per-candidate
min_samples: 5
metrics:
  exact_match: {direction: ">=", threshold: 0.9}
"""


def _arm_counts(out: Path) -> Counter:
    return Counter(arm for _, arm in pairs(out))


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Counter]:
    """The run (killed after `broken` stopped, then resumed), the policy, and the rows per
    arm at the kill."""
    tmp = tmp_path_factory.mktemp("until-decided")
    policy = tmp / "policy.yaml"
    policy.write_text(POLICY)
    path = traffic(tmp / "t.jsonl", N, spacing=0.05)
    out = tmp / "run"
    with family(out) as base:
        arms = [*base, "--until-decided", str(policy)]
        replay = subprocess.Popen(layergate_command("replay", "--traffic", str(path), *arms),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_for(lambda: "broken" in RunDir(out).read_manifest().arms_stopped,
                 what="the broken candidate to stop")
        replay.send_signal(signal.SIGKILL)
        replay.communicate(timeout=60)
        time.sleep(2)  # Locust's master, sent SIGTERM as its parent died, has written its last
        at_kill = _arm_counts(out)
        resumed = subprocess.run(layergate_command("replay", "--resume", *arms),
                                 capture_output=True, text=True, timeout=240)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return out, policy, at_kill


def test_a_decided_candidate_is_sent_nothing_more_while_the_others_go_on(
        stopped_run: tuple[Path, Path, Counter]) -> None:
    out, _, at_kill = stopped_run
    manifest = RunDir(out).read_manifest()
    assert manifest.status == "complete", manifest.notes
    assert list(manifest.arms_stopped) == ["broken"], manifest.arms_stopped
    stop = manifest.arms_stopped["broken"]
    assert stop["reason"].startswith("sequential verdict fail after ")
    assert stop["unsent"] > 0 and stop["first_unsent"] is not None
    counts = _arm_counts(out)
    assert set(pairs(out).values()) == {1}  # nothing twice
    # the resume sent the stopped candidate nothing; the others went on to their decision
    assert counts["broken"] == at_kill["broken"]
    assert counts["broken"] < counts["fast"] == counts["safe"] == counts["baseline"] \
        == counts["baseline2"]
    assert counts["fast"] >= PASS_AFTER
    assert counts["broken"] + stop["unsent"] <= N
    assert manifest.counts["broken"] == {"ok": counts["broken"], "error": 0}


def test_the_gate_judges_each_candidate_on_what_it_was_sent(
        stopped_run: tuple[Path, Path, Counter], tmp_path: Path) -> None:
    out, policy, _ = stopped_run
    family = evaluate_family(load_run(out), load_policy(policy))
    assert {c.name: c.verdict for c in family.candidates} == {
        "fast": PASS, "safe": PASS, "broken": FAIL}
    broken = next(c for c in family.candidates if c.name == "broken").result
    # the run is complete and the stopped arm's unsent requests are no errors
    assert {c.name: c.status for c in broken.checks if c.arm in ("all", "candidate")
            and c.name in ("run_complete", "error_rate")} == {
        "run_complete": PASS, "error_rate": PASS}
    result = CliRunner().invoke(main, ["gate", str(out), "--sequential", "--policy",
                                       str(policy), "--json", str(tmp_path / "s.json")])
    report = json.loads((tmp_path / "s.json").read_text())
    verdicts = {name: (d["verdict"], d["decided"]) for name, d in report["candidates"].items()}
    assert verdicts == {"fast": (PASS, True), "safe": (PASS, True), "broken": (FAIL, True)}
    assert report["candidates"]["broken"]["n"] < PASS_AFTER <= report["candidates"]["fast"]["n"]
    assert result.exit_code == 0, result.output
