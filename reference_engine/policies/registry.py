"""The policy registry: decorator registration, duplicate detection, "did you mean"."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reference_engine.config import EngineConfig
    from reference_engine.policies.base import Policy

_POLICIES: dict[str, type[Policy]] = {}


def register(name: str) -> Callable[[type[Policy]], type[Policy]]:
    """Class decorator: `@register("static")` makes the policy available under that name."""

    def add(cls: type[Policy]) -> type[Policy]:
        if name in _POLICIES and _POLICIES[name] is not cls:
            raise ValueError(f"policy {name!r} is already registered by "
                             f"{_POLICIES[name].__module__}.{_POLICIES[name].__qualname__}")
        cls.name = name
        _POLICIES[name] = cls
        return cls

    return add


def get_policy(name: str) -> type[Policy]:
    """The policy class registered under `name`; a ValueError suggests close names."""
    if name not in _POLICIES:
        close = difflib.get_close_matches(name, _POLICIES, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown policy {name!r}.{hint} "
                         f"Known policies: {', '.join(sorted(_POLICIES))}")
    return _POLICIES[name]


def policy_names() -> list[str]:
    return sorted(_POLICIES)


def create_policy(config: EngineConfig, num_layers: int) -> Policy:
    return get_policy(config.policy)(config, num_layers)
