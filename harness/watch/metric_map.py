"""Which metric each engine exposes for each role `layergate watch` reads: the table in
scenarios/watch/metric-names.yaml, and the PromQL selectors built from it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layergate.exporters import bundled
from layergate.exporters.catalogue import HISTOGRAM_ROLES, ROLES, did_you_mean
from layergate.exporters.errors import UsageError
from layergate.harness.policy_file import read_yaml

_NAME = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?$", re.S)


class MetricMapError(UsageError, ValueError):
    """A mapping file, engine or selector that cannot be used (a usage error)."""


def default_map_path() -> Path:
    return bundled.watch_metric_names()


@dataclass(frozen=True)
class MetricRef:
    """One metric name with the label matchers the mapping adds to it."""

    name: str
    matchers: str = ""

    def selector(self, suffix: str, arm_selector: str) -> str:
        """`name<suffix>{mapping's matchers, the arm's selector}`. A name with colons
        (vLLM's) also matches with underscores in their place: prometheus_client (0.2x)
        writes `vllm_...` when Prometheus negotiates OpenMetrics 1.0 (Prometheus 2.x
        does), `vllm:...` otherwise."""
        inner = ", ".join(m for m in (self.matchers, arm_selector) if m)
        if ":" not in self.name:
            return f"{self.name}{suffix}{{{inner}}}"
        pattern = self.name.replace(":", "[:_]") + suffix
        return f'{{__name__=~"{pattern}"{", " + inner if inner else ""}}}'


@dataclass(frozen=True)
class EngineMetrics:
    engine: str
    refs: dict[str, MetricRef]  # role -> metric

    @property
    def roles(self) -> set[str]:
        return set(self.refs)

    def queries(self, arm_selector: str, window: str) -> dict[str, str]:
        """The PromQL for each window value ("e2e_sum", "requests", ...): the summed
        increase over the window of everything the arm's selector picks."""
        out: dict[str, str] = {}
        for role, ref in self.refs.items():
            parts = ("_sum", "_count") if role in HISTOGRAM_ROLES else ("",)
            for suffix in parts:
                key = f"{role}{suffix}"
                out[key] = f"sum(increase({ref.selector(suffix, arm_selector)}[{window}]))"
        return out


def normalise_selector(text: str, option: str) -> str:
    """`arm="canary"` or `{arm="canary"}` -> `arm="canary"`; refuses an empty one."""
    inner = text.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1].strip()
    if not inner:
        raise MetricMapError(f"{option}: empty selector (give label matchers, e.g. "
                             f"arm=\"candidate\")")
    if "{" in inner or "}" in inner:
        raise MetricMapError(f"{option}: {text!r} is not a list of label matchers "
                             f"(e.g. job=\"vllm-canary\",namespace=\"prod\")")
    return inner


def load_engine_metrics(engine: str, path: Path | None = None) -> EngineMetrics:
    path = path or default_map_path()
    raw = read_yaml(path, MetricMapError, "metric names file")
    if not isinstance(raw, dict) or not raw:
        raise MetricMapError(f"{path}: expected a mapping of engine -> role -> metric name")
    if engine not in raw:
        raise MetricMapError(f"{path}: no engine {engine!r}{did_you_mean(engine, set(raw))}; "
                             f"it has {', '.join(sorted(raw))}")
    return EngineMetrics(engine, _refs(raw[engine], f"{path}: {engine}"))


def _refs(raw: Any, where: str) -> dict[str, MetricRef]:
    if not isinstance(raw, dict) or not raw:
        raise MetricMapError(f"{where}: expected a mapping of role -> metric name")
    refs: dict[str, MetricRef] = {}
    for role, text in raw.items():
        if role not in ROLES:
            raise MetricMapError(f"{where}.{role}: unknown role{did_you_mean(role, set(ROLES))}"
                                 f" (roles: {', '.join(ROLES)})")
        m = _NAME.match(str(text).strip()) if isinstance(text, str) else None
        if m is None:
            raise MetricMapError(f"{where}.{role}: {text!r} is not a metric name with optional "
                                 "{label matchers}")
        refs[role] = MetricRef(m.group(1), (m.group(2) or "").strip())
    if "requests" not in refs and "e2e" not in refs:
        raise MetricMapError(f"{where}: needs at least e2e or requests (how the watch sees "
                             "that an arm receives traffic)")
    return refs
