"""Gate policies: a YAML file saying which figures must clear which thresholds.

Every mistake in a policy file is a `PolicyError` naming the file and the key, so
`layergate gate` can turn it into a usage error (exit 2) that says what to fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from layergate.exporters import bundled
from layergate.exporters.catalogue import (
    ARMS,
    CANDIDATE,
    FIGURES,
    HOLM,
    MULTIPLICITY,
    RER,
    RER_DECODE,
    STAGE_BOUNDS,
    did_you_mean,
    figure_spec,
    split_turn,
)
from layergate.exporters.figures.config import MetricsConfig
from layergate.harness.policy_file import (
    PolicyError,
    Where,
    check_keys,
    flag,
    fraction,
    kind,
    number,
    read_yaml,
    top_level,
    whole_number,
)

Direction = Literal[">=", "<="]

# the defaults a policy file may override: the figures' own, so `metrics` and `gate` agree
DEFAULT_TARGET_RER = MetricsConfig.target_rer
DEFAULT_MIN_SAMPLES = MetricsConfig.min_samples
# no error seen: a positive limit passes only once the error rate's exact upper bound shows
# it (0 errors in 299 requests for 1 %), more requests than a short run sends
DEFAULT_MAX_ERROR_RATE = 0.0
DEFAULT_ERROR_RATE_CONFIDENCE = 0.95  # the level of that one-sided bound
_RULE_KEYS = {"threshold", "direction", "critical", "min_samples", "subtract_noise_floor",
              "required", "arm"}
_TOP_KEYS = {"extends", "name", "description", "require_complete", "min_samples", "target_rer",
             "max_error_rate", "gate_scenarios", "metrics", "scenarios", "rollout",
             "process_spread", "max_send_lag_p99_s", "multiplicity", "error_rate_confidence"}
DEFAULT_PROCESS_SPREAD = MetricsConfig.process_spread


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
    arm: str = CANDIDATE


@dataclass(frozen=True)
class Policy:
    name: str
    path: Path | None
    description: str = ""
    require_complete: bool = True
    target_rer: float = DEFAULT_TARGET_RER
    # prior SD of an engine process's log speed factor, in the timing figures' intervals
    process_spread: float = DEFAULT_PROCESS_SPREAD
    max_error_rate: dict[str, float] = field(default_factory=dict)  # arm -> limit
    default_max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    # the error-rate rule passes when the exact upper bound at this level is within the limit
    error_rate_confidence: float = DEFAULT_ERROR_RATE_CONFIDENCE
    gate_scenarios: bool = False  # per-scenario rows count toward the verdict
    rules: tuple[MetricRule, ...] = ()
    scenario_rules: dict[str, tuple[MetricRule, ...]] = field(default_factory=dict)
    # lower bound on RRR = (RER - target) / target per rollout stage past `internal`
    rollout: dict[str, float] = field(default_factory=lambda: dict(STAGE_BOUNDS))
    # bound on the p99 lag of sends behind their intended times; past it: inconclusive
    max_send_lag_p99_s: float | None = None
    # across several candidates of one run (layergate.exporters.catalogue.MULTIPLICITY)
    multiplicity: str = HOLM

    def error_limit(self, arm: str) -> float:
        return self.max_error_rate.get(arm, self.default_max_error_rate)

    def rules_for_scenario(self, scenario: str) -> tuple[MetricRule, ...]:
        """The rules one scenario's figures are judged by (its overrides, else the run's)."""
        return self.scenario_rules.get(scenario, self.rules)


def default_policy_dir() -> Path:
    return bundled.path(*bundled.POLICIES.folder)


# what `--policy` says on every command that takes a gate policy (harness/cli/options.py,
# the demo's DemoConfig.gate_policy)
POLICY_HELP = "Gate policy: a bundled name (`layergate policies` lists them) or a YAML file."


def load_policy(path: str | Path | None = None) -> Policy:
    """Read and validate a policy: a file path, a bundled name (`no-regression`), or None
    for the bundled `default`."""
    path = _resolve(path)
    return parse_policy(_read_raw(path, ()), path)


def _resolve(path: str | Path | None) -> Path:
    try:
        return bundled.resolve(bundled.POLICIES, path if path is not None else "default")
    except bundled.BundledNameError as exc:
        raise PolicyError(str(exc)) from exc


def flattened(path: str | Path | None = None) -> dict[str, Any]:
    """A policy's YAML with its `extends` chain merged in: one file that stands alone."""
    return _read_raw(_resolve(path), ())


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
    min_samples = whole_number(raw.get("min_samples", DEFAULT_MIN_SAMPLES), where,
                               "min_samples")
    target = number(raw.get("target_rer", DEFAULT_TARGET_RER), where, "target_rer")
    if target <= 0:
        raise where.error("target_rer", f"must be > 0, got {target}")
    spread = number(raw.get("process_spread", DEFAULT_PROCESS_SPREAD), where, "process_spread")
    if not 0 <= spread < 1:
        raise where.error("process_spread", f"must be in [0, 1) (an SD of log speed), got "
                          f"{spread}")
    metrics = raw.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        raise where.error("metrics", "expected a non-empty mapping of figure name -> rule")
    rules = tuple(_rule(name, spec, where, f"metrics.{name}", min_samples, target)
                  for name, spec in metrics.items())
    default_limit, limits = _error_limits(raw.get("max_error_rate", DEFAULT_MAX_ERROR_RATE),
                                          where)
    return Policy(
        name=str(raw.get("name") or (path.stem if path else "policy")),
        path=path,
        description=str(raw.get("description", "")).strip(),
        require_complete=flag(raw.get("require_complete", True), where, "require_complete"),
        target_rer=target,
        process_spread=spread,
        max_error_rate=limits,
        default_max_error_rate=default_limit,
        error_rate_confidence=_error_confidence(raw.get("error_rate_confidence"), where),
        gate_scenarios=flag(raw.get("gate_scenarios", False), where, "gate_scenarios"),
        rules=rules,
        scenario_rules=_scenario_rules(raw.get("scenarios") or {}, metrics, where,
                                       min_samples, target),
        rollout=_rollout(raw.get("rollout") or {}, where),
        max_send_lag_p99_s=_lag_bound(raw.get("max_send_lag_p99_s"), where),
        multiplicity=_multiplicity(raw.get("multiplicity", HOLM), where),
    )


def _multiplicity(raw: Any, where: Where) -> str:
    if raw not in MULTIPLICITY:
        raise where.error("multiplicity", f"unknown method {raw!r}{did_you_mean(raw, MULTIPLICITY)}"
                          f" (use {', '.join(MULTIPLICITY)})")
    return raw


def _lag_bound(raw: Any, where: Where) -> float | None:
    if raw is None:
        return None
    bound = number(raw, where, "max_send_lag_p99_s")
    if bound <= 0:
        raise where.error("max_send_lag_p99_s", f"must be > 0 seconds (or left out: no "
                          f"bound), got {bound}")
    return bound


def _rule(name: Any, spec: Any, where: Where, key: str, min_samples: int,
          target: float) -> MetricRule:
    try:
        base = split_turn(str(name))[0]
    except ValueError as exc:
        raise where.error(key, str(exc)) from exc
    if base not in FIGURES:
        raise where.error(key, f"unknown figure {name!r}{did_you_mean(name, FIGURES)}")
    figure = figure_spec(name)
    if not figure.gateable:
        raise where.error(key, f"{name} cannot be gated: {figure.not_gated}")
    if not isinstance(spec, dict):
        raise where.error(key, f"expected a mapping of rule keys, got {kind(spec)}")
    check_keys(spec, _RULE_KEYS, where, key)
    if "threshold" not in spec and name not in (RER, RER_DECODE):
        raise where.error(f"{key}.threshold", "missing (every gated figure needs a threshold)")
    direction = spec.get("direction", figure.direction)
    if direction not in (">=", "<="):
        raise where.error(f"{key}.direction", f"expected '>=' or '<=', got {direction!r}")
    if direction != figure.direction:
        raise where.error(f"{key}.direction", f"{name}: {figure.better} is better, so the "
                          f"good side is {figure.direction!r}, not {direction!r}")
    subtract = flag(spec.get("subtract_noise_floor", False), where,
                     f"{key}.subtract_noise_floor")
    if subtract and not figure.excess:
        with_excess = ", ".join(n for n, f in FIGURES.items() if f.excess)
        raise where.error(f"{key}.subtract_noise_floor", f"{name} carries no excess over the "
                          f"noise floor (those that do: {with_excess})")
    arm = spec.get("arm", CANDIDATE)
    if arm not in ARMS:
        raise where.error(f"{key}.arm", f"unknown arm {arm!r}{did_you_mean(arm, ARMS)}")
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


def _error_confidence(raw: Any, where: Where) -> float:
    if raw is None:
        return DEFAULT_ERROR_RATE_CONFIDENCE
    level = number(raw, where, "error_rate_confidence")
    if not 0.5 <= level < 1:
        raise where.error("error_rate_confidence", f"must be in [0.5, 1) (the level of the "
                          f"error rate's one-sided upper bound), got {level}")
    return level


def _error_limits(raw: Any, where: Where) -> tuple[float, dict[str, float]]:
    if not isinstance(raw, dict):
        return fraction(raw, where, "max_error_rate"), {}
    limits: dict[str, float] = {}
    default = DEFAULT_MAX_ERROR_RATE
    for arm, value in raw.items():
        if arm == "default":
            default = fraction(value, where, "max_error_rate.default")
        elif arm in ARMS:
            limits[arm] = fraction(value, where, f"max_error_rate.{arm}")
        else:
            raise where.error(f"max_error_rate.{arm}", f"unknown arm{did_you_mean(arm, ARMS)}"
                              f" (use {', '.join(ARMS)} or default)")
    return default, limits


def _rollout(raw: Any, where: Where) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise where.error("rollout", f"expected a mapping, got {kind(raw)}")
    check_keys(raw, set(STAGE_BOUNDS), where, "rollout")
    bounds = {**STAGE_BOUNDS, **{k: number(v, where, f"rollout.{k}") for k, v in raw.items()}}
    values = list(bounds.values())
    if values != sorted(values):
        raise where.error("rollout", "stage bounds must not decrease: "
                          f"{' <= '.join(bounds)}")
    return bounds
