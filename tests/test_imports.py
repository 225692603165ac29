"""The layers import downwards only (docs/ARCHITECTURE.md): `harness` and `exporters` import
without torch (the replayer runs on load-generation machines that have no model: every
module is imported in a fresh interpreter, and torch / transformers must not be among what
got loaded); `harness` never imports `reference_engine` and `reference_engine` never imports
`harness`; `exporters` imports neither; `benchmarks` never imports `tests`. Inside
`harness`, each room imports only the rooms before it on a request's way (capture ->
replay -> store / run directory -> gate -> report, watch beside, stack and the CLI above):
`ROOMS` is that table. The gate is entered by its one door (`layergate.harness.gate`), its
parts import in one direction (`GATE_PARTS`), with no circle and no import made late. And
a name says one thing: a word of the glossary (exporters/catalogue.py `GLOSSARY`) names
only the modules it lists, and no two classes of `harness` and `exporters` share a name."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from layergate.exporters.catalogue import GLOSSARY

# run only inside the Locust process (Locust monkey-patches the standard library)
LOCUST_ONLY = {"layergate.harness.replay.locustfile",
               "layergate.harness.replay.gevent_transport",
               "layergate.harness.replay.channel_work"}

SCRIPT = """
import importlib, pkgutil, sys
skip = set(sys.argv[1:])
names = []
for package in ("layergate.exporters", "layergate.harness"):
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


def _folder_name(module: str) -> str:
    """An import of layergate's, named by the repository's folders (`layergate.harness.gate`
    is `harness.gate`): the layers and rooms are folders."""
    return module.removeprefix("layergate.")


def _imported_modules(package: str) -> dict[str, set[str]]:
    """module path -> the modules it imports anywhere (inside functions too), layergate's
    named by folder."""
    root = Path(__file__).resolve().parents[1] / package
    return {str(Path(path).relative_to(root.parent)): {_folder_name(n) for n in names}
            for path, names in _raw_imports(root).items()}


def _imported_packages(package: str) -> dict[str, set[str]]:
    """module path -> the top-level packages it imports anywhere (inside functions too)."""
    return {path: {n.split(".")[0] for n in names}
            for path, names in _imported_modules(package).items()}


@pytest.mark.parametrize(("package", "forbidden"), [
    ("harness", {"reference_engine"}),  # the engine's commands are registered by module path
    ("reference_engine", {"harness"}),  # the engine never depends on the harness
    ("exporters", {"harness", "reference_engine"}),  # the bottom layer imports neither
])
def test_layers_import_only_downwards(package: str, forbidden: set[str]) -> None:
    wrong = {path: sorted(names & forbidden)
             for path, names in _imported_packages(package).items() if names & forbidden}
    assert not wrong, f"{package} imports {forbidden}: {wrong}"


# the exporters proper: they publish figures, so they may read the figures room
PUBLISHERS = {"exporters/prometheus_export.py", "exporters/capacity_export.py",
              "exporters/otel_export.py"}


def test_the_figures_room_sits_between_the_vocabulary_and_the_exporters() -> None:
    # the vocabulary and formats below the calculators never need a figure; the
    # calculators never publish one
    modules = _imported_modules("exporters")
    below = {path: sorted(n for n in names if n.startswith("exporters.figures"))
             for path, names in modules.items()
             if not path.startswith("exporters/figures/") and path not in PUBLISHERS}
    assert not {p: n for p, n in below.items() if n}, below
    publishers = {p.removesuffix(".py").replace("/", ".") for p in PUBLISHERS}
    above = {path: sorted(names & publishers) for path, names in modules.items()
             if path.startswith("exporters/figures/")}
    assert not {p: n for p, n in above.items() if n}, above


def test_benchmarks_take_from_the_tests_only_their_rigs() -> None:
    # the rigs (echo and slot servers, synthetic runs, the watch rig) live in tests/support/;
    # a benchmark never runs a test's own code
    root = Path(__file__).resolve().parents[1] / "benchmarks"
    wrong = {path: sorted(n for n in names if n.split(".")[0] == "tests"
                          and not n.startswith("tests.support."))
             for path, names in _raw_imports(root).items()}
    assert not {p: n for p, n in wrong.items() if n}, wrong


# what several rooms share, each one concept: beside every room, importing none
SHARED = {"manifest", "scenarios", "processes", "openai_stream", "policy_file", "store",
          "stops", "install_source", "readiness", "prometheus_api", "interrupts"}
# room of harness -> the rooms it may import (its own and `exporters` always): a request's
# data goes forward only, so no room imports one after it on the way
PIPELINE = ("capture", "traces", "replay", "rundir", "sweepdir", "gate", "report")
ROOMS: dict[str, set[str]] = {
    **{room: set() for room in SHARED},
    "capture": SHARED,  # records traffic through a proxy
    "traces": SHARED,  # imports public traces into traffic
    "replay": SHARED | {"rundir"},  # sends the traffic, writes the store of a run directory
    # load tools' results into a run directory, one arm per import
    "results_import": SHARED | {"rundir"},
    "rundir": SHARED,  # a run directory: manifest, traffic, store
    "sweepdir": SHARED,  # a capacity sweep's directory, of run directories
    "judge": SHARED,  # asks an LLM judge whether a run's answers are right
    "gate": SHARED | {"rundir", "sweepdir"},  # reads a run, judges it
    "report": SHARED | {"rundir", "sweepdir", "gate"},  # shows a verdict
    "watch": SHARED | {"gate"},  # beside: judges live figures by the gate's rules
    # above the pipeline: each runs several of its rooms
    "determinism": SHARED | {"replay", "rundir"},  # `determinism`: replays of one arm
    "capacity": SHARED | {"replay", "rundir", "sweepdir", "gate", "report"},  # replays, judged
    "starter": SHARED | {"gate"},  # `init`: templates checked as the gate reads them
    "stack": SHARED | {*PIPELINE, "watch", "determinism"},  # the demo: the whole job
}
ROOMS["cli"] = set(ROOMS)  # the CLI above everything: thin shells over the rooms


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "harness" and len(parts) > 1 else None


def test_harness_rooms_import_only_forward() -> None:
    wrong = {}
    for path, names in _imported_modules("harness").items():
        room = _room(path.removesuffix(".py").replace("/", "."))
        if room is None or room == "__init__":
            continue
        assert room in ROOMS, f"{path}: room {room!r} is not in ROOMS (say what it may import)"
        imported = {_room(n) for n in names} - {None, room}
        if imported - ROOMS[room]:
            wrong[path] = sorted(imported - ROOMS[room])
    assert not wrong, f"imports that run back up the pipeline (docs/ARCHITECTURE.md): {wrong}"


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


BARE = ("harness", "exporters", "reference_engine")


def test_every_import_of_the_project_is_under_layergate() -> None:
    """An install has no top-level `harness`, `exporters` or `reference_engine`; a checkout
    does (the folders), so a bare import would work here and fail installed, or load a
    module twice under two names."""
    root = Path(__file__).resolve().parents[1]
    wrong = []
    for folder in (*BARE, "tests", "benchmarks", "layergate"):
        for path, names in _raw_imports(root / folder).items():
            bare = sorted(n for n in names if n.split(".")[0] in BARE)
            if bare:
                wrong.append(f"{path}: {', '.join(bare)}")
    assert not wrong, "imports outside the layergate package:\n" + "\n".join(wrong)


def _raw_imports(root: Path) -> dict[str, set[str]]:
    """file -> the modules it imports anywhere, as written."""
    out = {}
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        out[str(path)] = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                          for alias in node.names} | {
            node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    return out


# --- the gate: one door, two machines, no circle, nothing lazy ------------------------

GATE = "harness.gate"  # the door: harness/gate/__init__.py
# the parts of harness/gate/ and what each may import of it: the shared modules (policy,
# checks, candidates) none of the rest, each machine only the shared ones, the dispatcher
# the fixed machine, the door everything behind it
GATE_PARTS: dict[str, set[str]] = {
    "shared": {"shared"},
    "fixed": {"shared", "fixed"},
    "sequential": {"shared", "sequential"},
    "dispatch": {"shared", "fixed", "dispatch"},
    "door": {"shared", "fixed", "sequential", "dispatch"},
}


def _gate_part(module: str) -> str:
    rest = module.removeprefix(GATE).lstrip(".").split(".")[0]
    return {"": "door", "fixed": "fixed", "sequential": "sequential",
            "dispatch": "dispatch"}.get(rest, "shared")


def _gate_modules() -> dict[str, Path]:
    """Every module of harness/gate by its folder name (`harness.gate.fixed.family`)."""
    root = Path(__file__).resolve().parents[1]
    out = {}
    for path in (root / "harness" / "gate").rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _gate_edges() -> dict[str, set[str]]:
    """gate module -> the gate modules it imports (a `from PACKAGE import MODULE` names the
    module)."""
    modules = _gate_modules()
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                base = _folder_name(node.module)
                found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                          for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {_folder_name(a.name) for a in node.names}
        edges[name] = {m for m in found if m in modules} - {name}
    return edges


def test_the_gate_is_entered_by_its_door_only() -> None:
    """Every room outside harness/gate imports the gate from `layergate.harness.gate`, and
    only the names it hands on (its `__all__`): what lies behind it may move."""
    from layergate.harness import gate

    root = Path(__file__).resolve().parents[1]
    wrong = []
    for package in BARE:
        for path in (root / package).rglob("*.py"):
            if path.is_relative_to(root / "harness" / "gate"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = [_folder_name(a.name) for a in node.names] \
                    if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [_folder_name(node.module)]
                    if names[0] == GATE:
                        names += [f"{GATE}.{a.name}" for a in node.names
                                  if a.name not in gate.__all__]
                behind = [n for n in names if n.startswith(GATE + ".")]
                if behind:
                    wrong.append(f"{path.relative_to(root)}:{node.lineno}: {', '.join(behind)}")
    assert not wrong, "imports behind the gate's door:\n" + "\n".join(wrong)


def test_the_gate_s_parts_import_only_those_before_them() -> None:
    wrong = {name: sorted(m for m in imported
                          if _gate_part(m) not in GATE_PARTS[_gate_part(name)])
             for name, imported in _gate_edges().items()}
    assert not {k: v for k, v in wrong.items() if v}, wrong


def test_no_import_circle_in_the_gate() -> None:
    edges = _gate_edges()
    circles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(edges[node]):
            if nxt in path:
                circles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in done:
                visit(nxt, [*path, nxt])
        done.add(node)

    done: set[str] = set()
    for start in sorted(edges):
        if start not in done:
            visit(start, [start])
    assert not circles, f"import circles in harness/gate: {circles}"


def test_the_gate_imports_at_the_top_of_its_modules() -> None:
    """No import inside a function and no module `__getattr__` in harness/gate: what a
    module needs shows at its top, and no circle hides behind a late import."""
    wrong = []
    for name, path in _gate_modules().items():
        tree = ast.parse(path.read_text(), str(path))
        wrong += [f"{name}: module __getattr__" for node in tree.body
                  if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"]
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                wrong += [f"{name}:{node.lineno} in {func.name}" for node in ast.walk(func)
                          if isinstance(node, ast.Import | ast.ImportFrom)]
    assert not wrong, f"imports made late in harness/gate: {wrong}"


# --- names: one word, one thing (exporters/catalogue.py GLOSSARY) ---------------------


def _named(word: str) -> set[str]:
    """The modules and folders of harness/, exporters/ and reference_engine/ whose name
    begins with `word`, from the repository's top (a folder ending in "/")."""
    root = Path(__file__).resolve().parents[1]
    out = set()
    for top in BARE:
        for folder, dirs, files in os.walk(root / top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            here = Path(folder).relative_to(root)
            out |= {f"{(here / d).as_posix()}/" for d in dirs if d.startswith(word)}
            out |= {(here / f).as_posix() for f in files
                    if f.endswith(".py") and f != "__init__.py" and f.startswith(word)}
    return out


@pytest.mark.parametrize("name", GLOSSARY, ids=lambda name: name.word)
def test_a_glossary_word_names_only_its_modules(name) -> None:
    """Only the modules the glossary lists are named after its word (so `judge` is the
    LLM judge's alone), and each it lists is there."""
    assert _named(name.word) == set(name.modules)


def test_every_config_module_holds_its_room_s_config() -> None:
    config = next(n for n in GLOSSARY if n.word == "config")
    root = Path(__file__).resolve().parents[1]
    without = [path for path in config.modules
               if not any(isinstance(node, ast.ClassDef) and node.name.endswith("Config")
                          for node in ast.parse((root / path).read_text()).body)]
    assert not without, f"config.py without a ...Config class: {without}"


def test_no_two_classes_of_harness_and_exporters_share_a_name() -> None:
    """A class name says one thing across the harness and the layer below it (the engine,
    which never meets the harness, keeps its own)."""
    root = Path(__file__).resolve().parents[1]
    owners: dict[str, list[str]] = {}
    for package in ("harness", "exporters"):
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.parse(path.read_text(), str(path)).body:
                if isinstance(node, ast.ClassDef):
                    owners.setdefault(node.name, []).append(str(path.relative_to(root)))
    shared = {name: paths for name, paths in owners.items() if len(paths) > 1}
    assert not shared, f"classes of one name: {shared}"
