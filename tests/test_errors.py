"""Every exception class of the project is a LayergateError (exporters/errors.py), so it
carries its exit code and the group's one handler (harness/cli/__init__.py) renders it: no
command translates an error by hand."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
from pathlib import Path

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.errors import LayergateError

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "exporters", "reference_engine")
# the engine's server answers these over HTTP (a status, not an exit code); no command
# ever ends with one
HTTP_ANSWERS = {"reference_engine.server.errors.APIError", "reference_engine.scheduler.QueueFull",
                "reference_engine.scheduler.EngineStopped"}


def _modules_raising_their_own() -> list[str]:
    """The modules that define an exception class: one deriving from a builtin exception or,
    to a fixed point, from a class of the project found to be one."""
    bases: dict[str, dict[str, set[str]]] = {}  # module -> class -> its bases' last names
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            bases[module] = {node.name: {ast.unparse(b).rpartition(".")[2] for b in node.bases}
                             for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    known = {name for name, obj in vars(builtins).items()
             if inspect.isclass(obj) and issubclass(obj, BaseException)}
    while True:
        found = {c for classes in bases.values() for c, b in classes.items() if b & known}
        if found <= known:
            break
        known |= found
    return [m for m, classes in bases.items()
            if any(b & known for b in classes.values())]


def _exception_classes() -> dict[str, type[BaseException]]:
    found = {}
    for name in _modules_raising_their_own():
        module = importlib.import_module(f"layergate.{name}")
        for attr, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == module.__name__ and not attr.startswith("_")):
                found[f"{name}.{attr}"] = obj
    return found


def test_every_project_exception_carries_its_exit_code() -> None:
    classes = _exception_classes()
    assert len(classes) > 30, sorted(classes)
    assert HTTP_ANSWERS <= set(classes)
    strays = [name for name, cls in classes.items()
              if name not in HTTP_ANSWERS and not issubclass(cls, LayergateError)]
    assert not strays, f"not LayergateErrors (exporters/errors.py): {strays}"
    for name, cls in classes.items():
        if name not in HTTP_ANSWERS and cls is not LayergateError:
            assert isinstance(cls.exit_code, ExitCode), name
