"""`layergate compare RUN_A RUN_B`: two runs of identical echo arms show no gated change; a
run whose candidate sits behind a proxy that doubles its latency shows the latency regression
and exits 1; runs of different traffic are reported as such, their answers left unpaired."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.harness.cli import main
from layergate.harness.processes import layergate_command
from tests.support.delay_proxy import DelayProxy
from tests.support.echo import echo_server
from tests.support.replay_rig import TOKEN_DELAY_S
from tests.support.traffic import traffic

pytestmark = [pytest.mark.slow, pytest.mark.locust]

POLICY = """\
name: compare-test
min_samples: 10
process_spread: 0
metrics:
  exact_match: {direction: ">=", threshold: -0.10, subtract_noise_floor: true}
  latency_ratio: {direction: "<=", threshold: 0.10, subtract_noise_floor: true}
"""


def _replay(path: Path, out: Path, baseline: str, **candidates: str) -> Path:
    named = [x for name, url in candidates.items() for x in ("--candidate", f"{name}={url}")]
    done = subprocess.run(layergate_command(
        "replay", "--traffic", str(path), "--baseline", baseline, "--baseline2", baseline,
        *named, "--out", str(out), "--no-progress", "--timeout", "20"),
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """before: one candidate; after: the same candidate and a slowed one, on the same
    traffic; other: the first candidate on other traffic."""
    tmp = tmp_path_factory.mktemp("compare")
    (tmp / "policy.yaml").write_text(POLICY)
    same = traffic(tmp / "t.jsonl", 20, spacing=0.1)
    other = traffic(tmp / "u.jsonl", 12, spacing=0.1)
    with echo_server("--token-delay", str(TOKEN_DELAY_S)) as echo, \
            DelayProxy(echo, extra=1.0) as slow:
        return {"policy": tmp / "policy.yaml",
                "before": _replay(same, tmp / "before", echo, fast=echo),
                "after": _replay(same, tmp / "after", echo, fast=echo, slow=slow.url),
                "other": _replay(other, tmp / "other", echo, fast=echo)}


def _compare(runs: dict[str, Path], a: str, b: str, tmp: Path, *args: str) -> tuple:
    out = tmp / f"{a}-{b}.json"
    result = CliRunner().invoke(main, ["compare", str(runs[a]), str(runs[b]), "--policy",
                                       str(runs["policy"]), "--json", str(out), *args])
    return result, json.loads(out.read_text()) if out.is_file() else None


def test_identical_arms_in_two_runs_show_no_gated_change(runs, tmp_path: Path) -> None:
    result, report = _compare(runs, "before", "after", tmp_path, "--arm", "fast")
    assert result.exit_code == 0, result.output
    assert "no gated figure regressed" in result.output
    assert report["same_traffic"] and report["regressions"] == []
    assert report["outputs_changed"] == 0 and report["paired_requests"] == 20
    gated = {f["name"]: f for f in report["figures"] if f["gated"]}
    assert {"exact_match", "latency_ratio", "error_rate"} == set(gated)


def test_a_slowed_arm_is_a_latency_regression_and_exits_1(runs, tmp_path: Path) -> None:
    result, report = _compare(runs, "before", "after", tmp_path, "--arm-a", "fast",
                              "--arm-b", "slow")
    assert result.exit_code == 1, result.output
    assert report["regressions"] == ["latency_ratio"], report["regressions"]
    latency = next(f for f in report["figures"] if f["name"] == "latency_ratio")
    assert latency["outside_both"] and latency["delta"] > 0.5
    assert "REGRESSION" in result.output


def test_runs_of_different_traffic_are_reported_and_not_paired(runs, tmp_path: Path) -> None:
    result, report = _compare(runs, "before", "other", tmp_path)
    assert result.exit_code == 0, result.output
    assert not report["same_traffic"] and report["outputs_changed"] is None
    assert len(set(report["traffic_sha256"])) == 2
    assert "the traffic differs" in result.output
    several, _ = _compare(runs, "after", "after", tmp_path)
    assert several.exit_code == 2 and "--arm" in several.output, several.output
