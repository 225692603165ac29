"""Checking one value of a policy file (a gate policy, a watch policy, the metric-name map):
each failure is a `PolicyError` that names the file and the dotted key, with a "did you mean"
for a misspelt name. The gate and watch both read policy files, so it sits beside both."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from layergate.exporters.catalogue import did_you_mean
from layergate.exporters.errors import UsageError


class PolicyError(UsageError, ValueError):
    """A policy file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Where:
    path: Path | None

    def error(self, key: str, message: str) -> PolicyError:
        place = str(self.path) if self.path else "<policy>"
        return PolicyError(f"{place}: {key + ': ' if key else ''}{message}")


def read_yaml(path: Path, error: type[ValueError] = PolicyError,
              what: str = "policy file") -> Any:
    """The YAML in `path`; a file that cannot be read or parsed is `error`, naming it."""
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from exc


def top_level(raw: Any, allowed: set[str], where: Where) -> dict:
    """A policy file's top level: a mapping with only `allowed` keys."""
    if not isinstance(raw, dict):
        raise where.error("", f"expected a mapping at the top level, got {kind(raw)}")
    check_keys(raw, allowed, where, "")
    return raw


def check_keys(raw: dict, allowed: set[str], where: Where, key: str) -> None:
    for name in raw:
        if name not in allowed:
            full = f"{key}.{name}" if key else str(name)
            raise where.error(full, f"unknown key{did_you_mean(name, allowed)}")


def kind(value: Any) -> str:
    return type(value).__name__ if value is not None else "nothing"


def number(value: Any, where: Where, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where.error(key, f"expected a number, got {value!r}")
    return float(value)


def fraction(value: Any, where: Where, key: str) -> float:
    share = number(value, where, key)
    if not 0.0 <= share <= 1.0:
        raise where.error(key, f"expected a fraction in [0, 1], got {share}")
    return share


def whole_number(value: Any, where: Where, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise where.error(key, f"expected a whole number >= 0, got {value!r}")
    return value


def flag(value: Any, where: Where, key: str) -> bool:
    if not isinstance(value, bool):
        raise where.error(key, f"expected true or false, got {value!r}")
    return value
