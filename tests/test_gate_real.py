"""The gate and every report on a real shadow replay: the real SmolLM2 engine behind all
three arms (A/A/A), replayed through Locust, judged under no-regression."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from junitparser import JUnitXml

from layergate.harness.cli import main
from layergate.harness.gate.policy import default_policy_dir
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.rundir import load_run

pytestmark = [pytest.mark.locust]

PROMPTS = [("short", "Name a colour."), ("short", "Say hello."),
           ("medium", "Explain in one sentence what a prefix cache does in an LLM server."),
           ("medium", "Give me two tips for writing clear commit messages, briefly.")]


@pytest.mark.model
def test_gate_reports_on_a_real_replay(full_engine, tmp_path):
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("".join(json.dumps({
        "id": f"real-{i}", "offset_s": 0.0, "scenario": scenario,
        "endpoint": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": text}], "max_tokens": 8,
                 "temperature": 0}}) + "\n" for i, (scenario, text) in enumerate(PROMPTS)))
    arms = {arm: full_engine.url for arm in ("baseline", "baseline2", "candidate")}
    run_dir = run_replay(ReplayConfig(out=tmp_path / "run", arms=arms, traffic=traffic,
                                      users=2, progress=False))
    run = load_run(run_dir)
    assert run.complete and all(r.ok for r in run.results), [r.error for r in run.results]
    out = {k: tmp_path / f"gate.{k}" for k in ("json", "junit", "html")}
    result = CliRunner().invoke(main, [
        "gate", str(run_dir), "--policy", str(default_policy_dir() / "no-regression.yaml"),
        "--json", str(out["json"]), "--junit", str(out["junit"]), "--html", str(out["html"])])
    # 4 requests are far fewer than the policy's 20 samples: never a pass, never a fail
    assert result.exit_code == 3, result.output
    report = json.loads(out["json"].read_text())
    assert report["verdict"] == "inconclusive"
    assert report["run"]["requests"] == {arm: {"ok": 4, "error": 0} for arm in arms}
    # one greedy engine behind every arm: the same tokens on each, in every pairing
    assert report["metrics"]["exact_match"]["value"] == 1.0
    assert report["metrics"]["exact_match"]["noise_floor"] == 1.0
    assert set(report["scenarios"]) == {"short", "medium"}
    assert sum(1 for suite in JUnitXml.fromfile(str(out["junit"])) for _ in suite) > 20
    page = out["html"].read_text()
    assert page.count("data:image/png;base64,") == 5
    # the engine's extension reached the report: every token ran all 30 layers
    layers = {n for r in run.results for n in r.extension["layers_executed_per_token"]}
    assert layers == {30}
