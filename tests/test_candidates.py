"""Several candidates in one replay: three candidates against echo arms (two that echo as the
baseline does, one that answers other words), the replay killed mid-run and resumed (nothing
lost or duplicated), then each candidate's verdict with Holm's adjustment across them, the
exit code under every `--require`, and the reports of all of them."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from junitparser import JUnitXml

from layergate.exporters.catalogue import FAIL, PASS, REQUIRE_ALL, REQUIRE_ANY, exit_code
from layergate.harness.cli import main
from layergate.harness.gate import evaluate_family
from layergate.harness.gate.policy import load_policy
from layergate.harness.gate.sequential.family import decide_each
from layergate.harness.processes import layergate_command
from layergate.harness.rundir import RunDir, load_run
from tests.support.replay_rig import family, pairs, rows, wait_for
from tests.support.traffic import traffic

pytestmark = [pytest.mark.slow, pytest.mark.locust]

N = 24  # records; 5 arms
CANDIDATES = ("fast", "safe", "broken")
POLICY = """\
name: family-test
min_samples: 10
metrics:
  exact_match: {direction: ">=", threshold: -0.10, subtract_noise_floor: true}
  termination_accuracy: {direction: ">=", threshold: 0.925}
"""


@pytest.fixture(scope="module")
def family_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The run (killed once, then resumed) and the policy."""
    tmp = tmp_path_factory.mktemp("family")
    policy = tmp / "policy.yaml"
    policy.write_text(POLICY)
    path = traffic(tmp / "t.jsonl", N, spacing=0.1)
    out = tmp / "run"
    with family(out) as arms:
        replay = subprocess.Popen(layergate_command("replay", "--traffic", str(path), *arms),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_for(lambda: rows(out) >= 20, what="the first results")
        replay.send_signal(signal.SIGKILL)
        replay.communicate(timeout=60)
        assert RunDir(out).read_manifest().status == "running"  # no chance to say more
        assert sum(pairs(out).values()) < N * 5
        resumed = subprocess.run(layergate_command("replay", "--resume", *arms),
                                 capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    return out, policy


def test_a_killed_replay_of_three_candidates_resumes_with_nothing_lost_or_twice(
        family_run: tuple[Path, Path]) -> None:
    out, _ = family_run
    run = load_run(out)
    assert run.manifest.status == "complete"
    assert list(run.manifest.arms) == ["baseline", "baseline2", *CANDIDATES]
    counted = pairs(out)
    assert len(counted) == N * 5 and set(counted.values()) == {1}
    assert {arm for _, arm in counted} == {"baseline", "baseline2", *CANDIDATES}
    assert all(run.manifest.counts[arm] == {"ok": N, "error": 0} for arm in CANDIDATES)


def test_each_candidate_is_judged_against_the_same_baseline_with_holm(
        family_run: tuple[Path, Path]) -> None:
    out, policy = family_run
    family = evaluate_family(load_run(out), load_policy(policy))
    verdicts = {c.name: c.verdict for c in family.candidates}
    assert verdicts == {"fast": PASS, "safe": PASS, "broken": FAIL}
    # Holm: all three at 1 - 0.05/3; the two that pass leave broken, judged at 1 - 0.05/1
    levels = {c.name: c.confidence for c in family.candidates}
    assert levels["fast"] == levels["safe"] == pytest.approx(1 - 0.05 / 3)
    assert levels["broken"] == pytest.approx(0.95)
    bonferroni = dataclasses.replace(load_policy(policy), multiplicity="bonferroni")
    assert [c.confidence for c in evaluate_family(load_run(out), bonferroni).candidates] \
        == pytest.approx([1 - 0.05 / 3] * 3)
    rule = {REQUIRE_ALL: FAIL, REQUIRE_ANY: PASS, "broken": FAIL, "safe": PASS}
    for require, verdict in rule.items():
        assert dataclasses.replace(family, require=require).verdict == verdict, require
    assert family.recommended is not None and family.recommended.name in ("fast", "safe")


def test_intervals_are_shown_family_wise_and_candidates_compared_paired(
        family_run: tuple[Path, Path]) -> None:
    out, policy = family_run
    family = evaluate_family(load_run(out), load_policy(policy))
    # broken is judged at 0.95 (Holm's last step), but shown at the family-wise level
    assert all(c.family_wise_confidence == pytest.approx(1 - 0.05 / 3)
               for c in family.candidates)
    broken = next(c for c in family.candidates if c.name == "broken")
    assert broken.confidence == pytest.approx(0.95) and broken.shown is broken.family_wise
    # each candidate its own process draw: fast and safe echo alike, their RER resamples
    # differ by more than the requests (which they share) would make them
    boots = {c.name: c.rer_resamples for c in family.candidates}
    assert all(b is not None and len(b) == 1000 for b in boots.values())
    assert [(d.first, d.second) for d in family.differences] == [
        ("fast", "safe"), ("fast", "broken"), ("safe", "broken")]
    assert family.recommended is not None
    assert family.recommended.name in family.not_worse_than_best
    low, high = family.recommended_interval
    assert low is not None and low < family.recommended.saving.key < high


def test_the_gate_exits_by_require_and_reports_every_candidate(
        family_run: tuple[Path, Path], tmp_path: Path) -> None:
    out, policy = family_run
    paths = {k: tmp_path / f"gate.{k}" for k in ("json", "junit", "markdown", "html")}
    result = CliRunner().invoke(main, [
        "gate", str(out), "--policy", str(policy), "--require", "all",
        *(x for k, p in paths.items() for x in (f"--{k}", str(p)))])
    assert result.exit_code == 1, result.output
    assert "Leaderboard" in result.output and "recommended" in result.output
    report = json.loads(paths["json"].read_text())
    assert report["verdict"] == FAIL and report["require"] == "all"
    assert report["multiplicity"]["method"] == "holm"
    assert report["multiplicity"]["confidence"]["broken"] == pytest.approx(0.95)
    assert set(report["candidates"]) == set(CANDIDATES)
    assert report["candidates"]["broken"]["verdict"] == FAIL
    assert report["recommended"] in ("fast", "safe")
    board = {row["name"]: row for row in report["leaderboard"]}
    assert board["broken"]["exact_match"]["value"] == 0 and board["fast"]["pareto"] in (
        True, False)
    suites = {s.name: s for s in JUnitXml.fromfile(str(paths["junit"]))}
    assert len(suites) == 3 and all(any(n.endswith(f"candidate {c}") for n in suites)
                                    for c in CANDIDATES)
    markdown = paths["markdown"].read_text()
    assert "### Leaderboard" in markdown and "candidate `broken`: **FAIL**" in markdown
    html = paths["html"].read_text()
    assert "id=plot-leaderboard" in html and all(f"id='candidate-{c}'" in html
                                                 for c in CANDIDATES)
    named = CliRunner().invoke(main, ["gate", str(out), "--policy", str(policy),
                                      "--require", "saef"])
    assert named.exit_code == 2 and "did you mean 'safe'" in named.output, named.output


def test_metrics_gives_each_candidate_its_figures_on_its_arm(
        family_run: tuple[Path, Path], tmp_path: Path) -> None:
    out, _ = family_run
    result = CliRunner().invoke(main, ["metrics", str(out), "--json", str(tmp_path / "m.json"),
                                       "--min-samples", "10"])
    assert result.exit_code == 0, result.output
    figures = json.loads((tmp_path / "m.json").read_text())["figures"]
    exact = {f["arm"]: f["value"] for f in figures
             if f["name"] == "exact_match" and f["scenario"] == "all"}
    assert exact == {"fast": 1.0, "safe": 1.0, "broken": 0.0, "baseline2": 1.0}


def test_sequential_verdicts_are_per_candidate(family_run: tuple[Path, Path],
                                               tmp_path: Path) -> None:
    out, policy = family_run
    result = CliRunner().invoke(main, ["gate", str(out), "--sequential", "--policy",
                                       str(policy), "--json", str(tmp_path / "s.json")])
    report = json.loads((tmp_path / "s.json").read_text())
    assert set(report["candidates"]) == set(CANDIDATES)
    broken = report["candidates"]["broken"]
    assert broken["verdict"] == FAIL and broken["decided"], broken
    assert result.exit_code == int(exit_code(report["verdict"])), result.output
    assert "sequential verdict of candidate broken: FAIL" in result.output
    # the replay's stop rule judges the rows as the store hands them over, the same way
    rows = decide_each(load_run(out).results, load_policy(policy))
    assert rows["broken"].verdict == FAIL and set(rows) == set(CANDIDATES)
