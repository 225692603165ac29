"""What a command's exit code means, in its --help and when it exits: the catalogue's codes
(exporters.catalogue.ExitCode), never restated."""

from __future__ import annotations

import click

from exporters.catalogue import EXIT_MEANINGS, ExitCode

RUN_DIR_UNREADABLE = "run directory missing or unreadable"


class InfrastructureError(click.ClickException):
    """Something outside layergate failed (a run directory, an arm, Grafana, a process)."""

    exit_code = ExitCode.INFRASTRUCTURE


def exit_codes_help(*codes: ExitCode, **meanings: str) -> str:
    """ "Exit codes: 0 pass, ..." for a command's --help: `codes` in the catalogue's words,
    `meanings` (by code name, e.g. PASS="done") where the command means something narrower."""
    words = [f"{int(c)} {meanings.get(c.name, EXIT_MEANINGS[c])}" for c in codes]
    return "Exit codes: " + ", ".join(words) + "."
