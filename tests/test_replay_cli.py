"""`layergate replay` and `layergate capture` usage errors: exit code 2 with a message that
names what is wrong (no engine needed: they fail before sending anything)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.harness.cli import main
from layergate.harness.manifest import Manifest
from layergate.harness.rundir import RunDir

ARMS = ["--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9"]


@pytest.fixture()
def traffic(tmp_path: Path) -> Path:
    line = {"id": "a", "offset_s": 0, "scenario": "short", "endpoint": "/v1/chat/completions",
            "body": {"messages": [{"role": "user", "content": "hi"}]}}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps({**line, "offset_s": -2}) + "\n")
    return path


def test_replay_usage_errors(tmp_path: Path, traffic: Path) -> None:
    out = ["--out", str(tmp_path / "run")]
    cases = [
        (["--traffic", str(traffic), *ARMS, *out], "t.jsonl:2: field 'offset_s'"),
        ([*ARMS, *out], "exactly one of traffic"),
        (["--traffic", str(traffic), "--scenario", "saas-mix", *ARMS, *out], "exactly one"),
        (["--scenario", "nope", *ARMS, *out], "unknown scenario 'nope'"),
        (["--traffic", str(traffic), "--rate", "1", "--users", "2", *ARMS, *out], "exclude"),
        (["--traffic", str(traffic), *ARMS, "--baseline2", "localhost:1", *out], "--baseline2"),
        (["--traffic", str(traffic), *ARMS, "--rate", "0", *out], "--rate"),
        (["--traffic", str(traffic), *ARMS, "--budget", "10", *out], "--until-decided"),
        (["--traffic", str(traffic), *ARMS, "--until-decided", str(traffic), *out],
         "--until-decided: "),
        (["--traffic", str(traffic), *ARMS], "Missing option '--out'"),
        (["--traffic", str(traffic), *ARMS, "--processes", "0", *out], "no worker to send"),
        (["--traffic", str(traffic), *ARMS, "--expect-workers", "2", *out],
         "needs --master-bind"),
        (["--traffic", str(traffic), *ARMS, "--expect-workers", "1", "--master-bind",
          "0.0.0.0:99999", *out], "--master-bind must be HOST[:PORT]"),
        ([*ARMS, "--resume", *out], "nothing to start it from"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(main, ["replay", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)


def test_replay_refuses_to_overwrite_a_run(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text("{}")
    result = CliRunner().invoke(main, ["replay", "--scenario", "saas-mix", *ARMS, "--out",
                                       str(tmp_path / "run")])
    assert result.exit_code == 2 and "--resume" in result.output


def test_replay_worker_usage_errors() -> None:
    for args, message in [([], "Missing option '--master'"),
                          (["--master", "host:port"], "HOST[:PORT]"),
                          (["--master", "h:1", "--processes", "0"], "--processes")]:
        result = CliRunner().invoke(main, ["replay-worker", *args])
        assert result.exit_code == 2 and message in result.output, result.output
def test_resume_leaves_a_complete_run_alone(tmp_path: Path, traffic: Path) -> None:
    """start-or-resume: a second `docker compose up` finds the run complete and sends nothing
    (the arms here refuse connections: a send would leave error rows and a new resume)."""
    run = RunDir(tmp_path / "run")
    manifest = Manifest.new("replay", {}, {"baseline": "http://127.0.0.1:9"}, {})
    counts = {"baseline": {"ok": 1, "error": 0}, "candidate": {"ok": 1, "error": 0}}
    run.write_manifest(manifest.with_status("complete", counts))
    before = run.manifest_path.read_text()
    result = CliRunner().invoke(main, ["replay", "--scenario", "saas-mix", *ARMS, "--resume",
                                       "--out", str(run.path), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "complete" in result.output
    assert run.manifest_path.read_text() == before
    assert not run.results_path.exists()


def test_capture_usage_errors(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "c.jsonl")]
    for args, message in [(["--upstream", "localhost:8000", *out], "--upstream"),
                          (["--upstream", "http://x", "--listen", "nope", *out], "--listen"),
                          (["--upstream", "http://x", "--sample", "0", *out], "--sample")]:
        result = CliRunner().invoke(main, ["capture", *args])
        assert result.exit_code == 2 and message in result.output, result.output


def test_several_candidates_are_named_and_checked(tmp_path: Path, traffic: Path) -> None:
    out = ["--out", str(tmp_path / "run"), "--traffic", str(traffic)]
    base = ["--baseline", "http://127.0.0.1:9"]
    cases = [
        ([*base, "--candidate", "a=http://127.0.0.1:9", "--candidate", "a=http://127.0.0.1:8",
          *out], "candidate 'a' given twice"),
        ([*base, "--candidate", "baseline2=http://127.0.0.1:9", *out], "is taken"),
        ([*base, "--candidate", "a b=http://127.0.0.1:9", *out], "use letters, digits"),
        ([*base, "--candidate", "fast=localhost:1", *out], "--candidate fast= must be"),
        ([*base, "--candidate", "fast=http://127.0.0.1:9", "--model-candidate", "slow=m",
          *out], "no candidate named 'slow'"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(main, ["replay", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
