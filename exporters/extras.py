"""The optional dependency sets ("extras") a command needs, checked before it imports them.

The extras' contents have one owner, the distribution's metadata (pyproject.toml's
`[project.optional-dependencies]`): a command asks which of its extra's distributions are
not installed, and says which `pip install` adds them instead of failing on an import.
"""

from __future__ import annotations

import re
from importlib import metadata

import click

DISTRIBUTION = "layergate"
ENGINE = "engine"  # the reference engine: torch, transformers, the HTTP server
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def missing(extra: str) -> list[str]:
    """The distributions of `extra` that are not installed. Empty when layergate itself is
    not installed (a checkout on the path: nothing to compare with)."""
    try:
        requirements = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]")
    names = [_NAME.match(r).group(0) for r in requirements if marker.search(r)]
    return [name for name in dict.fromkeys(names) if not _installed(name)]


def require(extra: str, command: str) -> None:
    """A usage error naming the extra to install when `command` cannot run without it."""
    absent = missing(extra)
    if absent:
        raise click.UsageError(
            f"`layergate {command}` needs the {extra!r} extra, which is not installed "
            f"(missing: {', '.join(absent)}): pip install '{DISTRIBUTION}[{extra}]', from "
            f"the source layergate came from (a checkout: '.[{extra}]'; a wheel: "
            f"'layergate-VERSION-py3-none-any.whl[{extra}]'; a git URL: "
            f"'{DISTRIBUTION}[{extra}] @ git+URL')")
