"""Each setting is defined once: every command's options that configure a dataclass are built
from its fields, so the CLI's defaults and choices are the dataclass's; old flag names still
work, with a warning on stderr."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from layergate.exporters.cli_options import FieldOption, config_field, field_choices, field_default
from layergate.exporters.figures.config import MetricsConfig
from layergate.harness.capacity.config import CapacityConfig
from layergate.harness.capture.config import CaptureConfig
from layergate.harness.cli import COMMANDS, main
from layergate.harness.determinism import DeterminismConfig
from layergate.harness.judge import Judge
from layergate.harness.replay.config import ReplayConfig
from layergate.harness.replay.workers import WorkerConfig
from layergate.harness.results_import.write import ResultsImportConfig
from layergate.harness.stack.demo_config import DemoConfig
from layergate.harness.traces.config import TraceImportConfig
from layergate.harness.watch.config import WatchConfig
from layergate.reference_engine.calibration.config import CalibrationConfig
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.skip_policies.registry import skip_policy_names

TRAFFIC = Path(__file__).resolve().parents[1] / "scenarios" / "traffic" / "calibration.jsonl"
# command -> (the dataclass its options configure, the least it must be given to parse)
CONFIGS: dict[str, tuple[type | None, list[str]]] = {
    "serve": (EngineConfig, []),
    "calibrate": (CalibrationConfig, ["--traffic", str(TRAFFIC), "--out", "r.json"]),
    "capture": (CaptureConfig, ["--upstream", "http://u", "--out", "t.jsonl"]),
    "import-trace": (TraceImportConfig, ["--format", "azure", "--out", "t.jsonl", "trace.csv"]),
    "import-results": (ResultsImportConfig, ["--tool", "guidellm", "--out", "run", "--arm",
                                             "baseline", str(TRAFFIC)]),
    "replay": (ReplayConfig, ["--baseline", "http://a", "--candidate", "http://b",
                              "--out", "run"]),
    "replay-worker": (WorkerConfig, ["--master", "127.0.0.1:5557"]),
    "capacity": (CapacityConfig, ["--baseline", "http://a", "--candidate", "http://b",
                                  "--out", "sweep"]),
    "determinism": (DeterminismConfig, ["--target", "http://b", "--traffic", "t.jsonl",
                                        "--out", "run"]),
    "metrics": (MetricsConfig, ["run"]),
    "gate": (None, ["run"]),
    "compare": (None, ["run_a", "run_b"]),
    "demo": (DemoConfig, []),
    "dashboards": (None, []),
    "policies": (None, []),
    "scenarios": (None, []),
    "init": (None, ["starter"]),
    "judge": (Judge, ["run", "--endpoint", "http://j", "--model", "m"]),
    "watch": (WatchConfig, ["--prometheus", "http://p", "--baseline", 'arm="a"',
                            "--candidate", 'arm="b"']),
}


def _command(name: str) -> click.Command:
    return main.get_command(click.Context(main), name)


def test_every_command_is_checked() -> None:
    assert set(CONFIGS) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(n for n, (config, _) in CONFIGS.items() if config))
def test_cli_defaults_and_choices_are_the_dataclass_s(name: str) -> None:
    config, required = CONFIGS[name]
    command = _command(name)
    ctx = command.make_context(name, list(required))
    fields = {f.name for f in dataclasses.fields(config)}
    built = [p for p in command.params if isinstance(p, FieldOption)]
    assert built, f"{name} builds no option from {config.__name__}"
    for param in command.params:
        if param.name in fields:  # an option of a setting must come from its field
            assert isinstance(param, FieldOption), f"{name} --{param.name} restates a setting"
    given = {p.lstrip("-") for p in required if p.startswith("--")}
    for param in built:
        f = config_field(config, param.name)
        assert param.help.startswith(f.metadata["help"])
        if f.default is not dataclasses.MISSING and param.opts[0].lstrip("-") not in given:
            assert ctx.params[param.name] == field_default(f), param.name
        choices = field_choices(f)
        if choices is not None:
            assert tuple(param.type.choices) == choices, param.name


def test_serve_offers_the_skip_policy_registry() -> None:
    option = next(p for p in _command("serve").params if p.name == "skip_policy")
    assert list(option.type.choices) == skip_policy_names()
    assert {"full", "static", "dynamic", "speculative"} <= set(skip_policy_names())


@pytest.mark.parametrize(("command", "old", "new", "value", "field", "expected"), [
    ("serve", "--policy", "--skip-policy", "static", "skip_policy", "static"),
    ("serve", "--policy-option", "--skip-policy-option", "gamma=3", "skip_policy_options",
     (("gamma", "3"),)),
    ("demo", "--candidate-policy", "--candidate", "speculative", "candidates",
     ("speculative",)),
])
def test_an_old_flag_still_works_and_says_so(command: str, old: str, new: str, value: str,
                                             field: str, expected: object,
                                             capsys: pytest.CaptureFixture) -> None:
    from layergate.exporters.cli_options import config_values

    config = CONFIGS[command][0]
    ctx = _command(command).make_context(command, [old, value])
    assert config_values(ctx, config)[field] == expected
    warning = capsys.readouterr().err
    assert f"{old} is deprecated" in warning and f"use {new}" in warning
    both = CliRunner().invoke(main, [command, old, value, new, value])
    assert both.exit_code == 2 and f"give {new} only" in both.output


def test_an_old_flag_keeps_its_checks() -> None:
    result = CliRunner().invoke(main, ["serve", "--policy", "shallow"])
    assert result.exit_code == 2
    assert "'shallow' is not one of" in result.output


def test_the_settings_replay_and_capacity_share_are_declared_once() -> None:
    """Every setting both commands take is one field of RunSettings, never redeclared, so
    its --help and its default are the same in both (the timeout once drifted: 120 s in one,
    60 s in the other)."""
    from layergate.harness.replay.settings import RunSettings

    names = [{f.name for f in dataclasses.fields(c)} for c in (ReplayConfig, CapacityConfig)]
    base = {f.name: f for f in dataclasses.fields(RunSettings)}
    assert names[0] & names[1] == set(base)
    helps = {}
    for command, config in (("replay", ReplayConfig), ("capacity", CapacityConfig)):
        assert all(config_field(config, name) is f for name, f in base.items()), config
        helps[command] = {p.name: (p.help, p.default) for p in _command(command).params
                          if isinstance(p, FieldOption) and p.name in base}
    assert helps["replay"] == helps["capacity"] and len(helps["replay"]) == len(base) - 2
