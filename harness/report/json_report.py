"""The gate's `--json` report (docs/FORMATS.md: verdict, run, metrics, scenarios)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.catalogue import RRR
from layergate.exporters.figures.answer_tally import answer_summary
from layergate.harness.gate import Check, GateResult, names_arm


def metric_key(check: Check) -> str:
    """`name` for the candidate (B against A) and run-wide checks, `name.arm` for a per-arm
    row (e.g. `error_rate.baseline`)."""
    return f"{check.name}.{check.arm}" if names_arm(check.arm) else check.name


def check_dict(check: Check) -> dict[str, Any]:
    return {
        "value": finite(check.value), "ci_low": finite(check.ci_low),
        "ci_high": finite(check.ci_high),
        "threshold": check.threshold, "direction": check.direction, "status": check.status,
        "noise_floor": finite(check.noise_floor),
        # what met the threshold: the excess over the noise floor when the policy subtracts it
        "compared": {"value": finite(check.compared), "ci_low": finite(check.compared_low),
                     "ci_high": finite(check.compared_high),
                     "subtract_noise_floor": check.subtract_noise_floor},
        "arm": check.arm, "critical": check.critical, "gating": check.gating, "n": check.n,
        "unit": check.unit, "reason": check.reason,
    }


def to_dict(result: GateResult) -> dict[str, Any]:
    rollout = result.rollout
    return {
        "verdict": result.verdict,
        "run": {
            "id": result.run_id,
            "path": str(result.run_dir) if result.run_dir else None,
            "status": result.manifest.get("status"),
            "kind": result.manifest.get("kind"),
            "arms": result.manifest.get("arms") or {a: None for a in result.arms},
            "requests": result.request_counts(),
            # per arm: where token counts came from, and the servers' quirks
            "answers": answer_summary(result.tallies),
            # how far the sends lagged their intended times (null: not recorded)
            "schedule": _schedule(result),
            "policy": {"name": result.policy.name,
                       "path": str(result.policy.path) if result.policy.path else None,
                       "target_rer": result.policy.target_rer},
            "exit_code": result.exit_code,
            "reasons": list(result.reasons),
            "rollout": {"stage": rollout.stage, "label": rollout.label,
                        RRR: finite(rollout.rrr), "rrr_ci_low": finite(rollout.rrr_low),
                        "rrr_ci_high": finite(rollout.rrr_high), "reason": rollout.reason},
        },
        "metrics": {metric_key(c): check_dict(c) for c in result.overall},
        "scenarios": {scenario: {metric_key(c): check_dict(c) for c in checks}
                      for scenario, checks in result.scenarios.items()},
    }


def _schedule(result: GateResult) -> dict[str, Any] | None:
    lag = result.schedule
    if lag is None:
        return None
    return {**lag.to_json(), "bound_s": result.policy.max_send_lag_p99_s}


def write_json(result: GateResult, path: str | Path) -> Path:
    return write_json_atomic(path, to_dict(result))


def finite(x: float | None) -> float | None:
    # JSON has no NaN / Infinity; an undefined number is null
    return None if x is None or not math.isfinite(x) else float(x)
