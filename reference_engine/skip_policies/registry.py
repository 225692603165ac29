"""The skip-policy registry: every name known without importing torch (so `layergate serve
--help` can offer them), each class loaded on first use; decorator registration, duplicate
detection, "did you mean"."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from layergate.exporters.catalogue import FULL_DEPTH

if TYPE_CHECKING:
    from layergate.reference_engine.config import EngineConfig
    from layergate.reference_engine.skip_policies.base import SkipPolicy

# the bundled skip policies: name -> the module whose import registers it
_MODULES = {name: f"layergate.reference_engine.skip_policies.{name}"
            for name in (FULL_DEPTH, "static", "dynamic", "speculative")}
_CLASSES: dict[str, type[SkipPolicy]] = {}


def register(name: str) -> Callable[[type[SkipPolicy]], type[SkipPolicy]]:
    """Class decorator: `@register("static")` makes the skip policy available by that name."""

    def add(cls: type[SkipPolicy]) -> type[SkipPolicy]:
        known = _CLASSES.get(name)
        owner = known.__module__ if known is not None else _MODULES.get(name)
        if known not in (None, cls) or owner not in (None, cls.__module__):
            raise ValueError(f"skip policy {name!r} is already registered by {owner}")
        cls.name = name
        _CLASSES[name] = cls
        return cls

    return add


def skip_policy_names() -> list[str]:
    """Every skip policy `serve --skip-policy` accepts (importing none of them)."""
    return sorted(_MODULES.keys() | _CLASSES.keys())


def get_skip_policy(name: str) -> type[SkipPolicy]:
    """The class registered under `name`; a ValueError suggests close names."""
    if name not in _CLASSES and name in _MODULES:
        importlib.import_module(_MODULES[name])
    if name not in _CLASSES:
        close = difflib.get_close_matches(name, skip_policy_names(), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown skip policy {name!r}.{hint} "
                         f"Known skip policies: {', '.join(skip_policy_names())}")
    return _CLASSES[name]


def create_skip_policy(config: EngineConfig, num_layers: int) -> SkipPolicy:
    return get_skip_policy(config.skip_policy)(config, num_layers)
