"""Gate policies: a YAML file saying which figures must clear which thresholds.

Every mistake in a policy file is a `PolicyError` naming the file and the key, so
`layergate gate` can turn it into a usage error (exit 2) that says what to fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from harness.gate.validate import (
    PolicyError,
    Where,
    check_keys,
    did_you_mean,
    flag,
    fraction,
    kind,
    number,
    read_yaml,
    top_level,
    whole_number,
)

Direction = Literal[">=", "<="]

# docs/CONTRACTS.md "Figure names"
FIGURE_NAMES = frozenset({
    "rer", "rer_decode", "rer_theoretical", "rer_realisation", "rrr",
    "termination_accuracy", "termination_truncated", "termination_premature",
    "termination_overrun", "termination_accuracy_recorded", "cache_hit_delta",
    "output_determinism", "resource_determinism", "latency_determinism", "exact_match",
    "first_divergence", "bleu", "chrf", "token_kl",
    "ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p90", "tpot_p99", "itl_p50",
    "itl_p90", "itl_p99", "e2e_p50", "e2e_p90", "e2e_p99", "e2e_jitter", "goodput",
    "token_efficiency", "error_rate", "latency_ratio",
})
# figures that carry detail["excess"]: B against A minus A' against A
NOISE_FLOOR_FIGURES = frozenset({"exact_match", "first_divergence", "bleu", "chrf", "token_kl"})
ARM_NAMES = frozenset({"baseline", "baseline2", "candidate"})

_RULE_KEYS = {"threshold", "direction", "critical", "min_samples", "subtract_noise_floor",
              "required", "arm"}
_TOP_KEYS = {"extends", "name", "description", "require_complete", "min_samples", "target_rer",
             "max_error_rate", "gate_scenarios", "metrics", "scenarios", "rollout"}
_ROLLOUT_KEYS = {"vip", "public_5pct", "full"}


@dataclass(frozen=True)
class MetricRule:
    """One gated figure. `threshold` applies to the figure's excess over the noise floor
    when `subtract_noise_floor`, else to its value."""

    name: str
    threshold: float
    direction: Direction
    critical: bool = True
    min_samples: int = 0
    subtract_noise_floor: bool = False
    required: bool = True  # False: a missing figure is skipped instead of inconclusive
    arm: str = "candidate"


@dataclass(frozen=True)
class RolloutStages:
    """Lower bounds on RRR = (RER - target) / target for each stage past `internal`."""

    vip: float = 0.0
    public_5pct: float = 0.25
    full: float = 0.5


@dataclass(frozen=True)
class Policy:
    name: str
    path: Path | None
    description: str = ""
    require_complete: bool = True
    target_rer: float = 0.20
    max_error_rate: dict[str, float] = field(default_factory=dict)  # arm -> limit
    default_max_error_rate: float = 0.01
    gate_scenarios: bool = False  # per-scenario rows count toward the verdict
    rules: tuple[MetricRule, ...] = ()
    scenario_rules: dict[str, tuple[MetricRule, ...]] = field(default_factory=dict)
    rollout: RolloutStages = RolloutStages()

    def error_limit(self, arm: str) -> float:
        return self.max_error_rate.get(arm, self.default_max_error_rate)

    def rules_for(self, scenario: str) -> tuple[MetricRule, ...]:
        return self.scenario_rules.get(scenario, self.rules)


def default_policy_dir() -> Path:
    import harness

    return Path(harness.__file__).resolve().parents[1] / "scenarios" / "policies"


def load_policy(path: str | Path | None = None) -> Policy:
    """Read and validate a policy file; None means the shipped `default.yaml`."""
    path = Path(path) if path is not None else default_policy_dir() / "default.yaml"
    return parse_policy(_read_raw(path, ()), path)


def _read_raw(path: Path, seen: tuple[Path, ...]) -> Any:
    """The file's YAML with `extends: OTHER.yaml` (relative to it) merged underneath."""
    if path.resolve() in seen:
        raise PolicyError(f"{path}: extends: circular ({' -> '.join(map(str, seen))})")
    raw = read_yaml(path)
    if not isinstance(raw, dict) or "extends" not in raw:
        return raw
    base_name = raw.pop("extends")
    if not isinstance(base_name, str):
        raise PolicyError(f"{path}: extends: expected a file name, got {base_name!r}")
    base = _read_raw(path.parent / base_name, (*seen, path.resolve()))
    # the child's keys win; metrics and scenarios merge one rule / scenario at a time
    merged = {**base, **raw}
    for key in ("metrics", "scenarios"):
        if isinstance(base.get(key), dict) and isinstance(raw.get(key), dict):
            merged[key] = {**base[key]}
            for name, spec in raw[key].items():
                old = base[key].get(name)
                both = isinstance(old, dict) and isinstance(spec, dict)
                merged[key][name] = {**old, **spec} if both else spec
    return merged


def parse_policy(raw: Any, path: Path | None = None) -> Policy:
    where = Where(path)
    raw = top_level(raw, _TOP_KEYS, where)
    min_samples = whole_number(raw.get("min_samples", 20), where, "min_samples")
    target = number(raw.get("target_rer", 0.20), where, "target_rer")
    if target <= 0:
        raise where.error("target_rer", f"must be > 0, got {target}")
    metrics = raw.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        raise where.error("metrics", "expected a non-empty mapping of figure name -> rule")
    rules = tuple(_rule(name, spec, where, f"metrics.{name}", min_samples, target)
                  for name, spec in metrics.items())
    default_limit, limits = _error_limits(raw.get("max_error_rate", 0.01), where)
    return Policy(
        name=str(raw.get("name") or (path.stem if path else "policy")),
        path=path,
        description=str(raw.get("description", "")).strip(),
        require_complete=flag(raw.get("require_complete", True), where, "require_complete"),
        target_rer=target,
        max_error_rate=limits,
        default_max_error_rate=default_limit,
        gate_scenarios=flag(raw.get("gate_scenarios", False), where, "gate_scenarios"),
        rules=rules,
        scenario_rules=_scenario_rules(raw.get("scenarios") or {}, metrics, where,
                                       min_samples, target),
        rollout=_rollout(raw.get("rollout") or {}, where),
    )


def _rule(name: Any, spec: Any, where: Where, key: str, min_samples: int,
          target: float) -> MetricRule:
    if name not in FIGURE_NAMES:
        raise where.error(key, f"unknown figure {name!r}{did_you_mean(name, FIGURE_NAMES)}")
    if not isinstance(spec, dict):
        raise where.error(key, f"expected a mapping of rule keys, got {kind(spec)}")
    check_keys(spec, _RULE_KEYS, where, key)
    if "threshold" not in spec and name not in ("rer", "rer_decode"):
        raise where.error(f"{key}.threshold", "missing (every gated figure needs a threshold)")
    direction = spec.get("direction")
    if direction not in (">=", "<="):
        raise where.error(f"{key}.direction", f"expected '>=' or '<=', got {direction!r}")
    subtract = flag(spec.get("subtract_noise_floor", False), where,
                     f"{key}.subtract_noise_floor")
    if subtract and name not in NOISE_FLOOR_FIGURES:
        raise where.error(f"{key}.subtract_noise_floor", "only consistency figures carry a "
                          f"noise floor ({', '.join(sorted(NOISE_FLOOR_FIGURES))})")
    arm = spec.get("arm", "candidate")
    if arm not in ARM_NAMES:
        raise where.error(f"{key}.arm", f"unknown arm {arm!r}{did_you_mean(arm, ARM_NAMES)}")
    # RER's threshold defaults to the policy's target: "RER >= target" is the benefit
    threshold = spec.get("threshold", target)
    return MetricRule(
        name=name,
        threshold=number(threshold, where, f"{key}.threshold"),
        direction=direction,
        critical=flag(spec.get("critical", True), where, f"{key}.critical"),
        min_samples=whole_number(spec.get("min_samples", min_samples), where, f"{key}.min_samples"),
        subtract_noise_floor=subtract,
        required=flag(spec.get("required", True), where, f"{key}.required"),
        arm=arm,
    )


def _scenario_rules(raw: Any, metrics: dict, where: Where, min_samples: int,
                    target: float) -> dict[str, tuple[MetricRule, ...]]:
    if not isinstance(raw, dict):
        raise where.error("scenarios", f"expected a mapping of scenario -> overrides, "
                          f"got {kind(raw)}")
    out: dict[str, tuple[MetricRule, ...]] = {}
    for scenario, overrides in raw.items():
        key = f"scenarios.{scenario}"
        if not isinstance(overrides, dict):
            raise where.error(key, f"expected a mapping of figure -> rule keys, "
                              f"got {kind(overrides)}")
        merged = {name: dict(spec) for name, spec in metrics.items()}
        for name, spec in overrides.items():
            if not isinstance(spec, dict):
                raise where.error(f"{key}.{name}", f"expected a mapping, got {kind(spec)}")
            merged[name] = {**merged.get(name, {}), **spec}
        out[str(scenario)] = tuple(
            _rule(name, spec, where, f"{key}.{name}" if name in overrides else f"metrics.{name}",
                  min_samples, target)
            for name, spec in merged.items())
    return out


def _error_limits(raw: Any, where: Where) -> tuple[float, dict[str, float]]:
    if not isinstance(raw, dict):
        return fraction(raw, where, "max_error_rate"), {}
    limits: dict[str, float] = {}
    default = 0.01
    for arm, value in raw.items():
        if arm == "default":
            default = fraction(value, where, "max_error_rate.default")
        elif arm in ARM_NAMES:
            limits[arm] = fraction(value, where, f"max_error_rate.{arm}")
        else:
            raise where.error(f"max_error_rate.{arm}", f"unknown arm{did_you_mean(arm, ARM_NAMES)}"
                              " (use baseline, baseline2, candidate or default)")
    return default, limits


def _rollout(raw: Any, where: Where) -> RolloutStages:
    if not isinstance(raw, dict):
        raise where.error("rollout", f"expected a mapping, got {kind(raw)}")
    check_keys(raw, _ROLLOUT_KEYS, where, "rollout")
    stages = replace(RolloutStages(), **{k: number(v, where, f"rollout.{k}")
                                         for k, v in raw.items()})
    if not stages.vip <= stages.public_5pct <= stages.full:
        raise where.error("rollout", "stage bounds must not decrease: vip <= public_5pct <= full")
    return stages
