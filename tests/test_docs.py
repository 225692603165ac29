"""The docs stay true to the code: every command of the `layergate` group has a row in
docs/CLI.md's command table, and every relative link of the README and docs/ leads to a
file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[1]
CLI_DOC = ROOT / "docs" / "CLI.md"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _commands() -> list[str]:
    """Every command as typed after `layergate`, a group's subcommands included."""
    ctx = click.Context(main)
    names = []
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        names.append(name)
        if isinstance(command, click.Group):
            names += [f"{name} {sub}" for sub in command.list_commands(ctx)]
    return names


def test_every_command_has_a_row_in_the_cli_doc() -> None:
    rows = [line.split("|")[1] for line in CLI_DOC.read_text().splitlines()
            if line.startswith("| `layergate ")]
    missing = [name for name in _commands()
               if not any(re.search(rf"`layergate {re.escape(name)}[ `]", row) for row in rows)]
    assert not missing, f"docs/CLI.md has no row for: {', '.join(missing)}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files(doc: Path) -> None:
    targets = [t for t in LINK.findall(doc.read_text())
               if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    broken = [t for t in targets if not (doc.parent / t.split("#")[0]).exists()]
    assert not broken, f"{doc.relative_to(ROOT)}: links to nothing: {broken}"
