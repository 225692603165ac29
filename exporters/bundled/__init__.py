"""Where the data layergate ships lives: the one owner of "bundled".

The repository keeps `scenarios/`, `dashboards/`, `docker-compose.yml` and `Dockerfile` at
its top level; this package links to them (the same names here are symbolic links in the
checkout) and the wheel and sdist carry them as real files, with the starter templates of
`layergate init` (`starter/`). Everything is found through `importlib.resources`, so a
checkout, an editable install and a wheel resolve the same way.

Names as well as paths: a policy, watch policy or mix is given either as a file path or as
the stem of a bundled file (`no-regression`, `saas-mix`). `resolve` decides which, and an
unknown name is a `BundledNameError` that lists the known ones.
"""

from __future__ import annotations

import atexit
import json
import textwrap
from contextlib import ExitStack
from dataclasses import dataclass
from functools import cache
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import yaml

from layergate.exporters.errors import UsageError


@dataclass(frozen=True)
class Kind:
    """One kind of named bundled file: where its files live and what they are called."""

    folder: tuple[str, ...]
    noun: str
    suffix: str = ".yaml"
    others: tuple[str, ...] = ()  # files of the folder that are not of this kind


POLICIES = Kind(("scenarios", "policies"), "gate policy")
WATCH_POLICIES = Kind(("scenarios", "watch"), "watch policy", others=("metric-names",))
MIXES = Kind(("scenarios", "mixes"), "scenario")


class BundledNameError(UsageError, ValueError):
    """A name that is neither a file nor a bundled name; lists the known names."""


_files = ExitStack()
atexit.register(_files.close)


@cache
def root() -> Path:
    """The bundled data as a directory (a zipped install is extracted once per process)."""
    return _files.enter_context(as_file(files(__name__)))


def path(*parts: str) -> Path:
    """A bundled file or folder, e.g. path("dashboards", "rules.yml")."""
    return root().joinpath(*parts)


def scenarios_dir() -> Path:
    return path("scenarios")


def dashboards_dir() -> Path:
    return path("dashboards")


def compose_file() -> Path:
    return path("docker-compose.yml")


def dockerfile() -> Path:
    """The image's Dockerfile (the repository's own), which a starter builds too."""
    return path("Dockerfile")


def starter_dir() -> Path:
    return path("starter")


def rules_file(model_key: str) -> Path:
    """The committed calibrated skip rules of a model (scenarios/rules/<model>.json)."""
    return path("scenarios", "rules", f"{model_key}.json")


def read_rules(file: Path) -> dict[str, Any]:
    """A rules file's JSON (a bundled one, or one `layergate calibrate` wrote), for what the
    harness shows of it: the engine validates every field when it serves with the file."""
    raw = json.loads(file.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"{file}: a rules file is a JSON object, got {type(raw).__name__}")
    return raw


def watch_metric_names() -> Path:
    return path(*WATCH_POLICIES.folder, "metric-names.yaml")


def names(kind: Kind) -> list[str]:
    folder = path(*kind.folder)
    return sorted(p.stem for p in folder.glob(f"*{kind.suffix}") if p.stem not in kind.others)


def named(kind: Kind, name: str) -> Path:
    """The bundled file of `name`; a BundledNameError listing the known names if none."""
    if name in names(kind):
        return path(*kind.folder, name + kind.suffix)
    raise BundledNameError(f"unknown {kind.noun} {name!r}: give a file path or one of "
                           f"{', '.join(names(kind)) or '(none bundled)'}")


def looks_like_path(value: str | Path) -> bool:
    """A path, not a name: a file that exists, or a name with a folder or a suffix in it."""
    text = str(value)
    return Path(text).is_file() or "/" in text or "\\" in text or Path(text).suffix != ""


def resolve(kind: Kind, value: str | Path) -> Path:
    """A file path as given, or the bundled file a name stands for."""
    if looks_like_path(value):
        return Path(value)
    return named(kind, str(value))


def description(file: Path, width: int = 88) -> str:
    """A bundled YAML file's `description` on one line, shortened to `width`."""
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return ""
    text = str(raw.get("description", "")) if isinstance(raw, dict) else ""
    return textwrap.shorten(text, width, placeholder=" ...")


def catalogue(kind: Kind) -> list[tuple[str, str]]:
    """(name, one-line description) of every bundled file of a kind, by name."""
    return [(name, description(named(kind, name))) for name in names(kind)]
