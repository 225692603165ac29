"""How a check reads in words: the same phrasing in the terminal, Markdown and JUnit."""

from __future__ import annotations

import math

from layergate.exporters.catalogue import FAIL, INCONCLUSIVE, PASS, VERDICTS
from layergate.exporters.figures import OVERALL
from layergate.exporters.figures.saturation import LOWER_THE_RATE, saturated_arms
from layergate.harness.gate import INFO, SKIPPED, Check, GateResult, names_arm

ICONS = {PASS: "✅", FAIL: "❌", INCONCLUSIVE: "⚠️", SKIPPED: "➖", INFO: "ℹ️"}
VERDICT_WORDS = {v: v.upper() for v in VERDICTS}


def num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.4g}"


def ci(low: float | None, high: float | None, spec: str = ".4g") -> str:
    """An interval in brackets; a missing end is unbounded (−∞ / ∞), as the gate judges it."""
    if low is None and high is None:
        return "—"
    lo = "−∞" if low is None else format(low, spec)
    hi = "∞" if high is None else format(high, spec)
    return f"[{lo}, {hi}]"


def threshold(check: Check) -> str:
    if check.threshold is None:
        return "—"
    base = f"{check.direction} {num(check.threshold)}"
    return f"excess {base}" if check.subtract_noise_floor else base


def label(check: Check) -> str:
    return f"{check.name} ({check.arm})" if names_arm(check.arm) else check.name


def summary_line(check: Check) -> str:
    """One line with value, CI, threshold and noise floor, as a failure message reads."""
    where = "" if check.scenario == OVERALL else f" [{check.scenario}]"
    parts = [f"{label(check)}{where}: {check.status}", f"value {num(check.value)}",
             f"CI {ci(check.ci_low, check.ci_high)}"]
    if check.subtract_noise_floor:
        parts.append(f"noise floor {num(check.noise_floor)}")
        parts.append(f"excess {num(check.compared)} CI "
                     f"{ci(check.compared_low, check.compared_high)}")
    elif check.noise_floor is not None:
        parts.append(f"noise floor {num(check.noise_floor)}")
    parts.append(f"threshold {threshold(check)}")
    parts.append(f"n {check.n}")
    return "; ".join(parts) + f" — {check.reason}"


def headline(result: GateResult) -> str:
    r = result.rollout
    return (f"{VERDICT_WORDS[result.verdict]} — run {result.run_id}, policy "
            f"{result.policy.name} (exit {result.exit_code}); rollout: {r.label}")


def saturation(result: GateResult) -> str:
    """A sentence when an arm queued (its latency verdicts are inconclusive), else ""."""
    queued = saturated_arms(list(result.figures))
    if not queued:
        return ""
    arms = ", ".join(sorted(queued))
    first = queued[sorted(queued)[0]][0]
    return (f"Saturated: {arms} queued ({first}), so the latency figures measure the queue "
            f"and their verdicts are inconclusive; {LOWER_THE_RATE}.")
