"""What a command's exit code means, in its --help and when it exits: the catalogue's codes
(layergate.exporters.catalogue.ExitCode), never restated. Each command declares the codes it can end
with (`exits`); its --help epilog is built from that declaration, and docs/CLI.md's table of
them is checked against it (tests/test_exit_codes.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from layergate.exporters.catalogue import EXIT_MEANINGS, ExitCode

RUN_DIR_UNREADABLE = "run directory missing or unreadable"

CommandT = TypeVar("CommandT", bound=click.Command)


def exit_codes_help(*codes: ExitCode, **meanings: str) -> str:
    """ "Exit codes: 0 pass, ..." for a command's --help: `codes` in the catalogue's words,
    `meanings` (by code name, e.g. PASS="done") where the command means something narrower."""
    words = [f"{int(c)} {meanings.get(c.name, EXIT_MEANINGS[c])}" for c in codes]
    return "Exit codes: " + ", ".join(words) + "."


def exits(*codes: ExitCode, **meanings: str) -> Callable[[CommandT], CommandT]:
    """Declare the exit codes of the command below (put it above `@click.command`): they
    become `command.exit_codes` and its --help epilog. Usage (2) is always among them:
    click exits 2 on a bad option whatever the command."""
    unknown = sorted(set(meanings) - {c.name for c in codes})
    if unknown:
        raise TypeError(f"meanings for undeclared exit codes: {', '.join(unknown)}")

    def declare(command: CommandT) -> CommandT:
        command.exit_codes = tuple(sorted({*codes, ExitCode.USAGE}))  # type: ignore[attr-defined]
        command.epilog = exit_codes_help(*command.exit_codes, **meanings)  # type: ignore[attr-defined]
        return command

    return declare


def declared_exit_codes(command: click.Command) -> tuple[ExitCode, ...] | None:
    """The codes `exits` declared for `command`, or None where it declared none."""
    return getattr(command, "exit_codes", None)
