"""Plumbing that has one owner is used through it (docs/ARCHITECTURE.md): every JSON file
the project writes goes through the atomic writer (`exporters/atomic.py`, one encoding, never
half a file); every exit code is a member of the catalogue's `ExitCode`, never a number; and
no module imports another module's private (underscore) name, so what one module shares has
a public name in the module that owns it. The package's modules are read as source (AST);
the tests themselves, which reach into what they test, are not held to the last rule."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ATOMIC = "exporters/atomic.py"
# appends one judgement per line and flushes it: a crash cuts at most the last line, which
# the reader skips; a whole-file rewrite per judgement would not scale
APPENDS = {"exporters/judgements.py"}
EXITS = {("sys", "exit"), ("os", "_exit"), (None, "exit"), (None, "quit"),
         (None, "SystemExit")}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    """Every module of the `layergate` package, each once (a folder may be reached through a
    link), named by its file in the repository."""
    files = {(Path(folder) / n).resolve()
             for folder, _, names in os.walk(ROOT / "layergate", followlinks=True)
             for n in names if n.endswith(".py")}
    assert len(files) > 200, "the package's modules were not found"
    for path in sorted(files):
        yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


def _name(node: ast.expr) -> tuple[str | None, str] | None:
    """`json.dump` as ("json", "dump"), `exit` as (None, "exit"); None for anything else."""
    if isinstance(node, ast.Attribute):
        owner = node.value.id if isinstance(node.value, ast.Name) else "?"
        return owner, node.attr
    if isinstance(node, ast.Name):
        return None, node.id
    return None


def _is_int(node: ast.expr | None) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, int)
            and not isinstance(node.value, bool))


def _dumps_inside(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _name(n.func) == ("json", "dumps")
               for n in ast.walk(node))


def direct_json_writes(tree: ast.Module) -> list[int]:
    """Lines that write JSON to a file other than through the atomic writer: `json.dump`,
    or a `write`, `write_text` or `write_bytes` of something `json.dumps` made."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        if name == ("json", "dump"):
            lines.append(node.lineno)
        elif isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("write", "write_text", "write_bytes") and \
                any(_dumps_inside(a) for a in [*node.args, *(k.value for k in node.keywords)]):
            lines.append(node.lineno)
    return lines


def literal_exit_codes(tree: ast.Module) -> list[int]:
    """Lines that exit with a number: `sys.exit(4)`, `SystemExit(130)`, `os._exit(2)` (also
    handed on: `spawn_later(t, os._exit, 2)`), `x.exit_code = 4`, `exit_code=4`."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if _name(node.func) in EXITS and node.args and _is_int(node.args[0]):
                lines.append(node.lineno)
            handed = [i for i, a in enumerate(node.args) if _name(a) in EXITS]
            if handed and any(_is_int(a) for a in node.args[handed[0] + 1:]):
                lines.append(node.lineno)
            if any(k.arg and k.arg.endswith("exit_code") and _is_int(k.value)
                   for k in node.keywords):
                lines.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and _is_int(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any((_name(t) or (None, ""))[1].endswith("exit_code") for t in targets):
                lines.append(node.lineno)
    return lines


def private_imports(tree: ast.Module) -> list[str]:
    """`from module import _name` of another module (a dunder is public)."""
    return [f"{node.lineno}: {node.module}.{alias.name}" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names
            if alias.name.startswith("_") and not alias.name.startswith("__")]


def _offenders(rule, skip: set[str] = frozenset()) -> dict[str, list]:
    """path -> what `rule` found in it, for every module but those `skip` names (by the end
    of their path, wherever the package's folders sit)."""
    return {path: found for path, tree in _modules() if not path.endswith(tuple(skip))
            for found in [rule(tree)] if found}


def test_json_files_are_written_only_through_the_atomic_writer() -> None:
    wrong = _offenders(direct_json_writes, {ATOMIC} | APPENDS)
    assert not wrong, ("JSON written past exporters/atomic.py (use write_json_atomic): "
                       f"{wrong}")


def test_exit_codes_are_the_catalogue_s() -> None:
    wrong = _offenders(literal_exit_codes)
    assert not wrong, f"exit codes as numbers (use exporters.catalogue.ExitCode): {wrong}"


def test_no_module_imports_another_s_private_name() -> None:
    wrong = _offenders(private_imports)
    assert not wrong, f"private names imported from other modules (make them public): {wrong}"


@pytest.mark.parametrize(("source", "rule", "lines"), [
    ("import json\njson.dump(x, fh)\n", direct_json_writes, [2]),
    ("p.write_text(json.dumps(x, indent=2) + '\\n')\n", direct_json_writes, [1]),
    ("fh.write(''.join(json.dumps(r) for r in rows))\n", direct_json_writes, [1]),
    ("write_json_atomic(p, x)\nbody = json.dumps(x)\n", direct_json_writes, []),
    ("sys.exit(4)\n", literal_exit_codes, [1]),
    ("raise SystemExit(130) from None\n", literal_exit_codes, [1]),
    ("env.process_exit_code = 2\n", literal_exit_codes, [1]),
    ("spawn_later(1.0, os._exit, 2)\n", literal_exit_codes, [1]),
    ("click.Abort(exit_code=3)\n", literal_exit_codes, [1]),
    ("sys.exit(main())\nraise SystemExit(ExitCode.FAIL)\nenv.process_exit_code = "
     "ExitCode.USAGE\n", literal_exit_codes, []),
])
def test_the_rules_see_what_they_forbid(source: str, rule, lines: list[int]) -> None:
    assert rule(ast.parse(source)) == lines


def test_the_private_import_rule_sees_one() -> None:
    tree = ast.parse("from a.b import _png, ARM\nfrom c import check as _check\n"
                     "from d import __version__\n")
    assert private_imports(tree) == ["1: a.b._png"]
