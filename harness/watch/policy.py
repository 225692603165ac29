"""Watch policies: which live figures gate a staged rollout, against which thresholds, at
which error rate. YAML, validated like gate policies (every mistake names file and key).

    name: no-regression
    alpha: 0.05          # chance of rolling back a candidate whose gated figures are all
                         # within their thresholds, over the whole rollout
    metrics:
      e2e_ratio: {direction: "<=", threshold: 1.10}
      error_rate_delta: {direction: "<=", threshold: 0.01}
      tpot_rer: {direction: ">=", threshold: 0.0, critical: false}
    inconclusive: hold   # a stage out of windows undecided: hold the weight (default) or
                         # rollback
    process_spread: 0.02 # SD of one engine process's log speed (the gate's prior): the
                         # latency ratios' intervals carry it as a margin (0: none)

Rule keys: threshold, direction (">=" / "<="), critical (default true: decides; false:
shown only), required (default true: a critical figure the engine cannot give is refused
at start, and one without data keeps the stage from advancing; false: skipped then).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layergate.exporters import bundled
from layergate.exporters.catalogue import FIGURES, HOLD, LIVE_FIGURES, ROLLBACK
from layergate.harness.gate import DEFAULT_PROCESS_SPREAD, MetricRule
from layergate.harness.policy_file import (
    PolicyError,
    Where,
    check_keys,
    did_you_mean,
    flag,
    kind,
    number,
    read_yaml,
    top_level,
)

_TOP_KEYS = {"name", "description", "alpha", "metrics", "inconclusive", "process_spread"}
INCONCLUSIVE_ACTIONS = (HOLD, ROLLBACK)
_RULE_KEYS = {"threshold", "direction", "critical", "required"}


@dataclass(frozen=True)
class WatchPolicy:
    name: str
    path: Path | None
    alpha: float
    rules: tuple[MetricRule, ...]
    description: str = ""
    inconclusive: str = INCONCLUSIVE_ACTIONS[0]  # what an undecided stage does
    # SD of an engine process's log speed factor, as the gate's `process_spread`: the two
    # arms' processes differ by u_B - u_A for the whole rollout, which no number of windows
    # averages out (docs/WATCH.md, "The between-process term")
    process_spread: float = DEFAULT_PROCESS_SPREAD

    @property
    def gating(self) -> tuple[MetricRule, ...]:
        return tuple(r for r in self.rules if r.critical)


def default_watch_policy() -> Path:
    return bundled.named(bundled.WATCH_POLICIES, "no-regression")


def load_watch_policy(path: str | Path | None = None) -> WatchPolicy:
    """A watch policy file, a bundled name (`no-regression`), or None for that default."""
    try:
        path = bundled.resolve(bundled.WATCH_POLICIES,
                               path if path is not None else "no-regression")
    except bundled.BundledNameError as exc:
        raise PolicyError(str(exc)) from exc
    return parse_watch_policy(read_yaml(path), path)


def parse_watch_policy(raw: Any, path: Path | None = None) -> WatchPolicy:
    where = Where(path)
    raw = top_level(raw, _TOP_KEYS, where)
    alpha = number(raw.get("alpha", 0.05), where, "alpha")
    if not 0 < alpha < 1:
        raise where.error("alpha", f"expected 0 < alpha < 1, got {alpha}")
    metrics = raw.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        raise where.error("metrics", "expected a non-empty mapping of live figure -> rule")
    rules = tuple(_rule(name, spec, where) for name, spec in metrics.items())
    if not any(r.critical for r in rules):
        raise where.error("metrics", "no critical figure: nothing would decide the rollout")
    inconclusive = raw.get("inconclusive", INCONCLUSIVE_ACTIONS[0])
    if inconclusive not in INCONCLUSIVE_ACTIONS:
        raise where.error("inconclusive", f"expected one of {', '.join(INCONCLUSIVE_ACTIONS)}"
                          f", got {inconclusive!r}")
    spread = number(raw.get("process_spread", DEFAULT_PROCESS_SPREAD), where, "process_spread")
    if not 0 <= spread < 1:
        raise where.error("process_spread", f"must be in [0, 1) (an SD of log speed), got "
                          f"{spread}")
    return WatchPolicy(name=str(raw.get("name") or (path.stem if path else "watch")),
                       path=path, alpha=alpha, rules=rules,
                       description=str(raw.get("description", "")).strip(),
                       inconclusive=inconclusive, process_spread=spread)


def _rule(name: Any, spec: Any, where: Where) -> MetricRule:
    key = f"metrics.{name}"
    if name in FIGURES and name not in LIVE_FIGURES:
        raise where.error(key, f"{name!r} is a figure of `layergate gate`: it needs a shadow "
                          "replay (both arms' answers to the same request, or repeats), which "
                          f"a live canary does not have (live figures: {', '.join(LIVE_FIGURES)})")
    if name not in LIVE_FIGURES:
        raise where.error(key, f"unknown live figure {name!r}"
                          f"{did_you_mean(name, set(LIVE_FIGURES))}"
                          f" (live figures: {', '.join(LIVE_FIGURES)}; consistency and "
                          "termination need a shadow replay: `layergate gate`)")
    if not isinstance(spec, dict):
        raise where.error(key, f"expected a mapping of rule keys, got {kind(spec)}")
    check_keys(spec, _RULE_KEYS, where, key)
    if "threshold" not in spec:
        raise where.error(f"{key}.threshold", "missing (every watched figure needs a threshold)")
    direction = spec.get("direction")
    if direction not in (">=", "<="):
        raise where.error(f"{key}.direction", f"expected '>=' or '<=', got {direction!r}")
    return MetricRule(name=name, threshold=number(spec["threshold"], where, f"{key}.threshold"),
                      direction=direction,
                      critical=flag(spec.get("critical", True), where, f"{key}.critical"),
                      required=flag(spec.get("required", True), where, f"{key}.required"))
