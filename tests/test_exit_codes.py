"""Exit codes: every harness command declares the codes it ends with, its --help lists exactly
those, docs/CLI.md's table agrees, and an error that carries its code (exporters/errors.py)
becomes `layergate COMMAND: error: MESSAGE` and that code, through the group's one handler."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from layergate.exporters.catalogue import ExitCode
from layergate.harness.cli import main
from layergate.harness.cli.exits import declared_exit_codes

DOCS = Path(__file__).resolve().parents[1] / "docs" / "CLI.md"
# the engine's commands: reference_engine imports nothing of harness, so they say their codes
# in their own words (docs/CLI.md)
ENGINE = {"serve", "calibrate"}


def _commands() -> dict[str, click.Command]:
    """Every leaf command by its path under `layergate` ("dashboards push")."""
    ctx = click.Context(main)
    out: dict[str, click.Command] = {}

    def walk(command: click.Command, path: str) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name), f"{path} {name}".strip())
        else:
            out[path] = command

    walk(main, "")
    return {path: c for path, c in out.items() if path.split()[0] not in ENGINE}


def _listed(help_text: str) -> list[int]:
    """The codes a --help's "Exit codes: 0 ..., 2 ..." epilog names, in order."""
    epilog = " ".join(help_text.split()).partition("Exit codes: ")[2]
    assert epilog, help_text
    return [int(code) for code in re.findall(r"(?:^|, )(\d) ", epilog)]


def test_every_command_lists_exactly_the_codes_it_declares() -> None:
    commands = _commands()
    assert len(commands) > 10
    for path, command in commands.items():
        declared = declared_exit_codes(command)
        assert declared, f"{path} declares no exit codes (harness/cli/exits.py: @exits)"
        assert ExitCode.USAGE in declared, path  # click's own usage errors
        shown = CliRunner().invoke(main, [*path.split(), "--help"], terminal_width=200)
        assert shown.exit_code == 0, shown.output
        assert _listed(shown.output) == [int(c) for c in declared], path


def test_the_docs_table_is_the_declarations() -> None:
    table = {}
    for line in DOCS.read_text().splitlines():
        row = re.fullmatch(r"\| `([a-z -]+)` \| ([\d, ]+) \|", line)
        if row:
            table[row[1]] = [int(c) for c in row[2].split(", ")]
    declared = {path: [int(c) for c in declared_exit_codes(command)]
                for path, command in _commands().items()}
    assert table == declared


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "run").mkdir()
    return tmp_path / "run"


@pytest.mark.parametrize(("args", "code", "message"), [
    (["gate", "{missing}"], ExitCode.INFRASTRUCTURE, "no such run directory"),
    (["gate", "{run}"], ExitCode.INFRASTRUCTURE, "not a run directory"),
    (["gate", "{run}", "--policy", "nope"], ExitCode.USAGE, "unknown gate policy 'nope'"),
    (["gate", "{run}", "--sequential"], ExitCode.INFRASTRUCTURE, "not a run directory"),
    (["metrics", "{missing}"], ExitCode.INFRASTRUCTURE, "no such run directory"),
    (["metrics", "{run}", "--policy", "nope"], ExitCode.USAGE, "unknown gate policy"),
    (["compare", "{run}", "{missing}"], ExitCode.INFRASTRUCTURE, "not a run directory"),
    (["replay", "--traffic", "{traffic}", "--baseline", "http://127.0.0.1:9", "--candidate",
      "http://127.0.0.1:9", "--out", "{out}"], ExitCode.USAGE, "t.jsonl:1"),
    # nothing listens on port 9: the preflight finds both arms not there, nothing is sent
    (["replay", "--scenario", "smoke", "--baseline", "http://127.0.0.1:9", "--candidate",
      "http://127.0.0.1:9", "--out", "{out}", "--preflight-timeout", "2", "--no-progress"],
     ExitCode.INFRASTRUCTURE, "arm(s) not there, nothing sent"),
])
def test_errors_end_with_their_code_and_one_message(args: list[str], code: ExitCode,
                                                    message: str, run_dir: Path,
                                                    tmp_path: Path) -> None:
    traffic = tmp_path / "t.jsonl"
    traffic.write_text("{not json\n")
    paths = {"missing": tmp_path / "nowhere", "run": run_dir, "traffic": traffic,
             "out": tmp_path / "out"}
    argv = [a.format(**paths) for a in args]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == code, result.output
    assert code in declared_exit_codes(_commands()[args[0]])
    assert f"layergate {args[0]}: error: " in result.stderr, result.output
    assert message in result.stderr, result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)



@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.synthetic_run import write_run

    return write_run(tmp_path_factory.mktemp("synthetic") / "run", 40).path


@pytest.mark.parametrize(("args", "message"), [
    (["--require", "nope"], "--require 'nope': not all, any or a candidate of the run"),
    (["--json", "{missing}/gate.json"], "--json: cannot write"),
])
def test_errors_once_translated_by_hand_reach_the_one_handler(
        args: list[str], message: str, synthetic_run: Path, tmp_path: Path) -> None:
    """A RequireError and an unwritable report path: usage errors (2) that the gate once
    turned into click's errors itself."""
    argv = ["gate", str(synthetic_run), *(a.format(missing=tmp_path / "no") for a in args)]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert f"layergate gate: error: {message}" in result.stderr, result.stderr
