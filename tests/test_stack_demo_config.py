"""The demo's configuration without running it: which engines each candidate gets, the
quick preset, the traffic it would replay, and usage errors through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.exporters.traffic import read_traffic
from layergate.harness.cli import main
from layergate.harness.stack.demo_config import CANDIDATES, DemoConfig
from layergate.harness.stack.demo_traffic import demo_traffic, determinism_sample
from layergate.harness.stack.demo_words import calibration_notes


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_each_candidate_gets_three_single_thread_engines(name: str, tmp_path: Path) -> None:
    engines = DemoConfig(out=tmp_path, candidates=(name,)).engines()
    assert [e.arm for e in engines] == ["baseline", "baseline2", "candidate"]
    assert all(e.threads == 1 and e.url is None for e in engines)
    baseline, baseline2, candidate = engines
    assert baseline.command(1) == baseline2.command(1)
    cmd = candidate.command(8000)
    assert cmd[cmd.index("--skip-policy") + 1] == ("full" if name == "engine-switches" else name)
    assert baseline.process_env()["OMP_NUM_THREADS"] == "1"


def test_engine_switches_turn_both_savings_off_in_the_baselines(tmp_path: Path) -> None:
    baseline, _, candidate = DemoConfig(out=tmp_path, candidates=("engine-switches",)) \
        .engines()
    assert baseline.extra_args == ("--prefix-cache", "off", "--padding", "max")
    assert candidate.extra_args == ("--prefix-cache", "on", "--padding", "bucketed")


def test_quick_is_much_smaller(tmp_path: Path) -> None:
    full, quick = DemoConfig(out=tmp_path), DemoConfig.quick(tmp_path)
    for name in ("requests", "max_tokens", "repeats", "determinism_prompts"):
        assert getattr(quick, name) < getattr(full, name), name
    assert DemoConfig.quick(tmp_path, requests=4).requests == 4  # what is given wins


def test_the_default_demo_judges_three_candidates_beside_one_pair_of_baselines(
        tmp_path: Path) -> None:
    engines = DemoConfig(out=tmp_path).engines()
    assert [e.arm for e in engines] == ["baseline", "baseline2", "static", "speculative",
                                        "dynamic"]
    static, dynamic = engines[2].command(1), engines[4].command(1)
    assert len(static[static.index("--skip-layers") + 1].split(",")) == 12
    rules = Path(dynamic[dynamic.index("--rules") + 1])
    assert json.loads(rules.read_text())["dynamic"]["rules"], "the loose rules skip nothing"
    with pytest.raises(ValueError, match="engine-switches runs alone"):
        DemoConfig(out=tmp_path, candidates=("static", "engine-switches"))


@pytest.mark.parametrize("bad", [{"candidates": ("turbo",)}, {"requests": 0},
                                 {"threads": 0}, {"rate": 0.0}])
def test_bad_config_is_refused(bad: dict, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=next(iter(bad)).split("_")[0]):
        DemoConfig(out=tmp_path, **bad)


def test_demo_traffic_is_the_mix_capped(tmp_path: Path) -> None:
    path = demo_traffic("saas-mix", tmp_path / "t.jsonl", requests=12, max_tokens=10,
                        rate=None)
    records = read_traffic(path).records
    assert len(records) == 12
    assert all(r.max_tokens <= 10 for r in records)
    assert {r.scenario for r in records} <= {"short", "medium", "long"}
    sample = read_traffic(determinism_sample(path, tmp_path / "s.jsonl", 4, 8)).records
    assert len(sample) == 4 and all(r.max_tokens <= 8 for r in sample)
    # one of each scenario before any repeats of one
    assert len({r.scenario for r in sample}) == len({r.scenario for r in records})


@pytest.mark.parametrize("args", [["--candidate", "turbo"], ["--threads", "0"],
                                  ["--requests", "0"], ["--repeats", "1"],
                                  ["--policy", "/nonexistent.yaml"]])
def test_demo_usage_errors_exit_2(args: list[str]) -> None:
    res = CliRunner().invoke(main, ["demo", *args])
    assert res.exit_code == 2, res.output


def test_calibration_notes_say_what_calibration_found(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"notes": ["dynamic: nothing kept consistency", "static: k=1"]}))
    assert calibration_notes("dynamic", rules) == [
        "Calibration (rules.json): dynamic: nothing kept consistency"]
    assert calibration_notes("engine-switches", rules) == []
    assert calibration_notes("static", tmp_path / "missing.json") == []


def test_a_bad_gate_policy_fails_before_anything_starts(tmp_path: Path) -> None:
    policy = tmp_path / "bad.yaml"
    policy.write_text("metrics: {rer: {thresold: 1}}\n")
    res = CliRunner().invoke(main, ["demo", "--policy", str(policy), "--out",
                                    str(tmp_path / "runs")])
    assert res.exit_code == 2 and "thresold" in res.output, res.output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", ["strict", "no-regression"])
def test_the_demo_takes_a_bundled_policy_name_as_gate_does(name: str, tmp_path: Path,
                                                           monkeypatch) -> None:
    from layergate.harness.gate import load_policy
    from layergate.harness.stack import demo

    given: list[DemoConfig] = []

    def run_demo(config: DemoConfig) -> demo.DemoOutcome:  # the stack is not started
        given.append(config)
        return demo.DemoOutcome(tmp_path, "pass", "full", {"html": tmp_path / "report.html"},
                                {})

    monkeypatch.setattr(demo, "run_demo", run_demo)
    res = CliRunner().invoke(main, ["demo", "--policy", name, "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    (config,) = given
    assert load_policy(config.gate_policy).name == load_policy(name).name == name
    unknown = CliRunner().invoke(main, ["demo", "--policy", "no-such-policy"])
    assert unknown.exit_code == 2 and "no-regression" in unknown.output, unknown.output
