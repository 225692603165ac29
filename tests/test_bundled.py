"""The bundled data (exporters.bundled): names as well as paths for policies, watch policies
and mixes, an unknown name as a usage error listing the known ones, the extras a command
needs, and `init` / `dashboards export` refusing to overwrite (through click's CliRunner;
tests/test_wheel.py runs the same from an installed wheel)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from layergate.exporters import bundled, extras
from layergate.harness.cli import main
from layergate.harness.gate import PolicyError, load_policy
from layergate.harness.gate.policy import flattened
from layergate.harness.scenarios import MixError, load_mix
from layergate.harness.watch.policy import load_watch_policy
from tests.test_gate_cli import build_run

ROOT = Path(__file__).resolve().parents[1]


def test_the_bundle_is_the_repository_s_top_level_data() -> None:
    for part in ("scenarios", "dashboards", "docker-compose.yml", "Dockerfile"):
        assert bundled.path(part).resolve() == (ROOT / part).resolve()
    assert bundled.names(bundled.POLICIES) == sorted(
        p.stem for p in (ROOT / "scenarios" / "policies").glob("*.yaml"))
    assert "metric-names" not in bundled.names(bundled.WATCH_POLICIES)


def test_names_and_paths_resolve_to_the_same_policy(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    by_name = load_policy("no-regression")
    by_path = load_policy(ROOT / "scenarios" / "policies" / "no-regression.yaml")
    assert by_name == dataclasses.replace(by_path, path=by_name.path)
    assert by_name.path.resolve() == by_path.path.resolve()
    assert load_policy(None).name == "default"
    assert load_watch_policy("no-regression") == load_watch_policy(None)
    assert load_mix("smoke").requests == load_mix(ROOT / "scenarios" / "mixes" /
                                                  "smoke.yaml").requests
    # a file in the working directory is a path, even without a folder in its name
    monkeypatch.chdir(tmp_path)
    Path("strict").mkdir()  # and a name is a name even beside a folder of that name
    Path("mine.yaml").write_text(yaml.safe_dump({**flattened("strict"), "name": "mine"}))
    assert load_policy("mine.yaml").name == "mine"


@pytest.mark.parametrize(("load", "error", "noun", "known"), [
    (load_policy, PolicyError, "gate policy", bundled.POLICIES),
    (load_watch_policy, PolicyError, "watch policy", bundled.WATCH_POLICIES),
    (load_mix, MixError, "scenario", bundled.MIXES),
])
def test_an_unknown_name_lists_the_known_names(load, error, noun: str,
                                               known: bundled.Kind) -> None:
    with pytest.raises(error, match=f"unknown {noun} 'nope'") as caught:
        load("nope")
    assert all(name in str(caught.value) for name in bundled.names(known))


def test_gate_takes_a_policy_name_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    run = build_run(tmp_path / "run")
    done = CliRunner().invoke(main, ["gate", str(run), "--policy", "strict", "--json",
                                     str(tmp_path / "g.json")])
    assert done.exit_code in (0, 1, 3), done.output
    assert json.loads((tmp_path / "g.json").read_text())["run"]["policy"]["name"] == "strict"
    bad = CliRunner().invoke(main, ["gate", str(run), "--policy", "stricter"])
    assert bad.exit_code == 2 and "unknown gate policy 'stricter'" in bad.output
    assert "no-regression" in bad.output


def test_policies_and_scenarios_list_one_line_each() -> None:
    policies = CliRunner().invoke(main, ["policies"]).output.splitlines()
    listed = [line.split()[0] for line in policies if line.startswith("  ")]
    assert listed == bundled.names(bundled.POLICIES) + bundled.names(bundled.WATCH_POLICIES)
    mixes = CliRunner().invoke(main, ["scenarios"]).output.splitlines()
    assert [line.split()[0] for line in mixes[1:]] == bundled.names(bundled.MIXES)
    assert all(len(line) <= 110 for line in policies + mixes)


def test_a_traffic_file_replaces_a_mix_set_in_the_environment(tmp_path: Path) -> None:
    """docker-compose.yml sets LAYERGATE_REPLAY_SCENARIO and, with TRAFFIC,
    LAYERGATE_REPLAY_TRAFFIC: the traffic file wins; typed, both are still refused."""
    traffic = ROOT / "scenarios" / "traffic" / "eval.jsonl"
    arms = ["--baseline", "http://127.0.0.1:9", "--candidate", "http://127.0.0.1:9",
            "--out", str(tmp_path / "run"), "--rate", "1", "--users", "2"]
    env = {"LAYERGATE_REPLAY_SCENARIO": "smoke", "LAYERGATE_REPLAY_TRAFFIC": str(traffic)}
    # the next check after the source's: it is reached, so the source was accepted
    done = CliRunner().invoke(main, ["replay", *arms], env=env)
    assert done.exit_code == 2 and "exclude each other" in done.output, done.output
    typed = CliRunner().invoke(main, ["replay", "--scenario", "smoke", *arms],
                               env={"LAYERGATE_REPLAY_TRAFFIC": str(traffic)})
    assert typed.exit_code == 2 and "exactly one" in typed.output
    empty = CliRunner().invoke(main, ["replay", *arms],
                               env={"LAYERGATE_REPLAY_SCENARIO": "smoke",
                                    "LAYERGATE_REPLAY_TRAFFIC": ""})
    assert "exclude each other" in empty.output  # an empty TRAFFIC is no traffic


def test_the_engine_extra_is_installed_here() -> None:
    """This environment has the `engine` extra; tests/test_wheel.py checks the message of
    an install without it."""
    assert extras.missing(extras.ENGINE) == []
    extras.require(extras.ENGINE, "serve")


@pytest.mark.parametrize("args", [["init", "--install-from", "0.1.0"], ["dashboards", "export"]])
def test_writers_refuse_to_overwrite_without_force(tmp_path: Path, args: list[str]) -> None:
    first = CliRunner().invoke(main, [*args, str(tmp_path / "out")])
    assert first.exit_code == 0, first.output
    written = sorted(p for p in (tmp_path / "out").rglob("*") if p.is_file())
    victim = written[0]
    victim.write_text("mine")
    again = CliRunner().invoke(main, [*args, str(tmp_path / "out")])
    assert again.exit_code == 2 and "--force" in again.output and str(victim) in again.output
    assert victim.read_text() == "mine"
    forced = CliRunner().invoke(main, [*args, str(tmp_path / "out"), "--force"])
    assert forced.exit_code == 0 and victim.read_text() != "mine"
