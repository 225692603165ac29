"""The layers import downwards only (docs/ARCHITECTURE.md): `harness` and `exporters` import
without torch (the replayer runs on load-generation machines that have no model: every
module is imported in a fresh interpreter, and torch / transformers must not be among what
got loaded); `reference_engine` never imports `harness`; `exporters` imports neither."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

# run only inside the Locust process (Locust monkey-patches the standard library)
LOCUST_ONLY = {"harness.replay.locustfile", "harness.replay.gevent_transport",
               "harness.replay.channel_work"}

SCRIPT = """
import importlib, pkgutil, sys
skip = set(sys.argv[1:])
names = []
for package in ("exporters", "harness"):
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if info.name not in skip and not info.name.endswith("__main__"):
            importlib.import_module(info.name)
            names.append(info.name)
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print(len(names), ",".join(heavy))
"""


def test_harness_and_exporters_never_import_torch() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT, *sorted(LOCUST_ONLY)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    count, heavy = out.stdout.split()[0], out.stdout.strip().partition(" ")[2]
    assert int(count) > 40  # every module was really imported
    assert heavy == "", f"importing harness/exporters loaded {heavy}"


def _imported_packages(package: str) -> dict[str, set[str]]:
    """module path -> the top-level packages it imports anywhere (inside functions too)."""
    root = Path(__file__).resolve().parents[1] / package
    out = {}
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
        names |= {node.module for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
        out[str(path.relative_to(root.parent))] = {n.split(".")[0] for n in names}
    return out


@pytest.mark.parametrize(("package", "forbidden"), [
    ("reference_engine", {"harness"}),  # the engine never depends on the harness
    ("exporters", {"harness", "reference_engine"}),  # the bottom layer imports neither
])
def test_layers_import_only_downwards(package: str, forbidden: set[str]) -> None:
    wrong = {path: sorted(names & forbidden)
             for path, names in _imported_packages(package).items() if names & forbidden}
    assert not wrong, f"{package} imports {forbidden}: {wrong}"


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def _installed_with_layergate() -> set[str]:
    """The distributions `pip install layergate` brings: pyproject's core dependencies and,
    installed, what they require in turn (an import of httpx's httpcore is safe; one of a
    package only the test extras bring is not)."""
    import re
    import tomllib
    from importlib.metadata import PackageNotFoundError, requires

    def name(requirement: str) -> str:
        return _norm(re.split(r"[<>=!~\[; (]", requirement.strip(), maxsplit=1)[0])

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml")
                            .read_text())["project"]
    todo = [name(dep) for dep in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        try:
            reqs = requires(dist) or []
        except PackageNotFoundError:
            continue
        todo += [name(r) for r in reqs if "extra ==" not in r]
    return seen


def test_harness_and_exporters_import_only_what_layergate_installs() -> None:
    """The replayer's and the exporter's machines (and the Docker image) install the core
    dependencies only: a third-party import that the test extras happen to satisfy would
    crash there, not here (scipy once did, in the stack's exporter)."""
    from importlib.metadata import packages_distributions

    owners = packages_distributions()
    installed = _installed_with_layergate()
    ours = {"harness", "exporters", "reference_engine"}
    wrong = {}
    for package in ("harness", "exporters"):
        for path, names in _imported_packages(package).items():
            third = {n for n in names - ours - set(sys.stdlib_module_names) if n in owners}
            missing = {n for n in third if not {_norm(d) for d in owners[n]} & installed}
            if missing:
                wrong[path] = sorted(missing)
    assert not wrong, f"imports outside what pyproject's core dependencies install: {wrong}"
