"""The docs stay true to the code: every command of the `layergate` group has a row in
docs/CLI.md's command table, and every relative link of the README and docs/ leads to a
file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from layergate.harness.cli import main

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


README = ROOT / "README.md"
COUNTS = {0: "no", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six",
          7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def _says(count: int) -> str:
    return COUNTS.get(count, str(count))


def test_the_readme_is_short() -> None:
    words = len(README.read_text().split())
    assert words <= 1000, f"README.md has {words} words (at most 1000: the rest is in docs/)"


def test_the_readme_s_counts_are_the_code_s() -> None:
    """The policies, skip policies, trace formats and commands the README counts."""
    from layergate.exporters import bundled
    from layergate.harness.traces.formats import get, names
    from layergate.reference_engine.skip_policies.registry import skip_policy_names

    text = " ".join(README.read_text().split())
    policies = len(bundled.names(bundled.POLICIES))
    assert f"{_says(policies).capitalize()} gate policies ship" in text
    assert f"{_says(len(skip_policy_names()))} skip policies" in text
    evals = [name for name in names() if get(name).references]
    assert f"{_says(len(names()) - len(evals))} public trace formats" in text
    assert f"{_says(len(evals))} eval layouts" in text
    assert f"The {len(main.list_commands(click.Context(main)))} commands" in text


def test_the_readme_opens_with_the_two_commands() -> None:
    block = README.read_text().split("```")[1]
    assert block.splitlines()[1].startswith("make demo") and "make test" in block


def test_the_architecture_s_names_are_the_glossary_s() -> None:
    """docs/ARCHITECTURE.md, "Names", has a row per word of the glossary
    (exporters/catalogue.py `GLOSSARY`) naming every module the glossary lists."""
    from layergate.exporters.catalogue import GLOSSARY

    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    names = text.split("\n## Names\n", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().strip("`"): line for line in names.splitlines()
            if line.startswith("| `")}
    wrong = {n.word: [m for m in n.modules if f"`{m}`" not in rows.get(n.word, "")]
             for n in GLOSSARY}
    assert set(rows) == {n.word for n in GLOSSARY}, sorted(set(rows) ^ {n.word for n in GLOSSARY})
    assert not {w: m for w, m in wrong.items() if m}, wrong


SCREEN = 50  # lines: a doc's first screen


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, a space a -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_doc_opens_with_a_map_of_its_sections(doc: Path) -> None:
    """Its first screen (the README's: after its two-command opening) links every section."""
    text = doc.read_text()
    if doc == README:
        text = text.split("```", 2)[2]
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # a `##` in code is no heading
    sections = re.findall(r"^## (.+)$", prose, re.M)
    first = "\n".join(text.splitlines()[:SCREEN])
    missing = [s for s in sections if f"(#{_anchor(s)})" not in first]
    assert sections and not missing, f"{doc.name}: the first {SCREEN} lines miss {missing}"


VALIDITY = ROOT / "docs" / "VALIDITY.md"
COMMAND = re.compile(r"`[^`]*(benchmarks/|make |pytest|layergate |python|tests/)[^`]*`")


def test_every_number_table_of_validity_names_its_command() -> None:
    """docs/VALIDITY.md keeps its numbers in tables, each with the command that measured
    them beside it: in the text just above the table, or in a column of its own."""
    lines = VALIDITY.read_text().splitlines()
    bare = []
    for i, line in enumerate(lines):
        if not line.startswith("|") or lines[i - 1].startswith("|"):
            continue
        j = i - 1
        while j >= 0 and not lines[j].startswith(("|", "#")):
            j -= 1
        above = "\n".join(lines[j + 1:i])
        if not COMMAND.search(above) and not re.search(r"\| (command|test|where) \|", line):
            bare.append(f"line {i + 1}: {line[:60]}")
    assert not bare, f"tables without their command: {bare}"
