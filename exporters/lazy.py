"""A package's names loaded from their modules on first use (PEP 562): a package whose
`__init__` would otherwise import every module it names, for a process that needs one of
them (a Locust worker importing `harness.replay.locustfile` pays for no runner, no store)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, homes: dict[str, str]) -> Callable[[str], Any]:
    """The package's `__getattr__`: name -> the attribute of the module `homes[name]`
    (relative to `package`), imported when the name is first asked for."""
    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)
    return __getattr__
