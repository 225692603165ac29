"""What the tests of foreign arms (llama.cpp, vLLM) share: the layergate CLI in-process, a
replay that fails on a dead server rather than on the run of errors it leaves, the gate
under a test policy, a run's figures, and the eval set's short greedy traffic."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from layergate.exporters.traffic import TrafficRecord, read_traffic, write_traffic
from layergate.harness.cli import main
from layergate.harness.processes import ManagedProcess
from layergate.harness.scenarios import SCENARIOS_DIR
from tests.support.processes import check_alive

# a gate policy the few requests of a foreign arm's test can decide (the bundled ones want
# 20 samples): the no-regression policy's consistency rules
POLICY = """\
name: foreign-arms
require_complete: true
min_samples: 5
max_error_rate: {default: 0.0}
metrics:
  exact_match: {direction: ">=", threshold: -0.10, subtract_noise_floor: true}
  termination_accuracy: {direction: ">=", threshold: 0.9}
  cache_hit_delta: {direction: "<=", threshold: 0.05, required: false}
  output_determinism: {direction: ">=", threshold: 0.95, min_samples: 2, required: false}
"""


def layergate(*args: str) -> Result:
    """The `layergate` command in-process; an exception it did not handle is raised."""
    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def greedy_traffic(path: Path, requests: int, max_tokens: int) -> Path:
    """The eval set's first `requests` short and medium records, greedy, `max_tokens` each."""
    records = [r for r in read_traffic(SCENARIOS_DIR / "traffic" / "eval.jsonl").records
               if r.scenario != "long"][:requests]
    return write_traffic(path, [
        TrafficRecord(r.id, 0.0, r.scenario, r.endpoint,
                      {**r.body, "max_tokens": max_tokens, "temperature": 0}) for r in records])


def replay(out: Path, traffic: Path, arms: dict[str, str], servers: list[ManagedProcess],
           *extra: str) -> Path:
    """`layergate replay` of `traffic` to `arms` (arm -> URL), one user, top-2 logprobs;
    a server of `servers` that died fails the test with its exit code and log."""
    urls = [a for arm, url in arms.items() for a in (f"--{arm}", url)]
    result = layergate("replay", "--traffic", str(traffic), *urls, "--out", str(out),
                       "--users", "1", "--logprobs", "2", "--no-progress", *extra)
    check_alive(servers)  # a dead server is the failure, not the run of errors it left
    assert result.exit_code == 0, result.output
    return out


def gate(run: Path, tmp_path: Path, policy: str) -> tuple[int, dict, str]:
    """`layergate gate` of `run` under the policy text `policy`: (exit code, the JSON
    report, the HTML report)."""
    path = tmp_path / "policy.yaml"
    path.write_text(policy)
    out = {k: tmp_path / f"gate.{k}" for k in ("json", "html")}
    result = layergate("gate", str(run), "--policy", str(path), "--json", str(out["json"]),
                       "--html", str(out["html"]))
    return result.exit_code, json.loads(out["json"].read_text()), out["html"].read_text()


def figures(run: Path, tmp_path: Path) -> dict[tuple[str, str], dict]:
    """The run's figures over every scenario, by (name, arm), as `metrics --json` writes
    them."""
    path = tmp_path / "metrics.json"
    result = layergate("metrics", str(run), "--json", str(path), "--resamples", "200")
    assert result.exit_code == 0, result.output
    return {(f["name"], f["arm"]): f for f in json.loads(path.read_text())["figures"]
            if f["scenario"] == "all"}
