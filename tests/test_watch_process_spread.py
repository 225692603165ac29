"""The watch's between-process term: the two arms' engine processes differ by u_B - u_A
for the whole rollout, which no number of windows averages out, so the latency intervals
carry a margin of z sqrt(2) tau (the policy's `process_spread`), as the fixed and the
sequential gate carry it."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from layergate.exporters.figures.canary import ArmWindow, Window, evidence, process_margin
from layergate.harness.policy_file import PolicyError
from layergate.harness.watch.policy import load_watch_policy, parse_watch_policy
from layergate.harness.watch.stages import PROCESS_SHARE, StageMachine, StagePlan

ROLES = {"e2e", "tpot", "requests", "errors"}
RULES = {"e2e_ratio": {"direction": "<=", "threshold": 1.10},
         "tpot_rer": {"direction": ">=", "threshold": 0.0, "critical": False},
         "error_rate_delta": {"direction": "<=", "threshold": 0.02}}


def policy(spread: float | None):
    raw = {"alpha": 0.05, "metrics": RULES}
    return parse_watch_policy(raw if spread is None else {**raw, "process_spread": spread})


def arm(rng: np.random.Generator, speed: float, n: int = 2000) -> ArmWindow:
    """A window of `n` requests from a process `speed` times slower, little request noise."""
    x = rng.lognormal(math.log(2.0 * speed), 0.05, n)
    t = rng.lognormal(math.log(0.03 * speed), 0.05, n)
    return ArmWindow({"e2e_sum": float(x.sum()), "e2e_count": float(n), "tpot_sum":
                      float(t.sum()), "tpot_count": float(n), "requests": float(n),
                      "errors": 0.0})


def windows(speed: float, k: int, seed: int = 0) -> list[Window]:
    rng = np.random.default_rng(seed)
    return [Window(i * 60, (i + 1) * 60, arm(rng, 1.0), arm(rng, speed)) for i in range(k)]


def test_the_policy_key_defaults_to_the_gates_prior_and_is_validated() -> None:
    assert load_watch_policy().process_spread == 0.02
    assert policy(None).process_spread == 0.02 and policy(0.0).process_spread == 0.0
    with pytest.raises(PolicyError, match="process_spread"):
        policy(-0.01)
    with pytest.raises(PolicyError, match="process_spread"):
        policy(1.5)


def test_the_margin_is_z_sqrt2_tau_and_widens_latency_figures_only() -> None:
    assert process_margin(0.02, 0.05) == pytest.approx(1.959964 * math.sqrt(2) * 0.02)
    assert process_margin(0.0, 0.05) == 0.0
    ws = windows(1.0, 8)
    m = 0.05
    for name in ("e2e_ratio", "tpot_ratio"):
        bare, wide = evidence(name, ws, 0.01, 5), evidence(name, ws, 0.01, 5, m)
        assert wide.estimate == bare.estimate
        assert math.log(wide.high) - math.log(bare.high) == pytest.approx(m)
        assert math.log(bare.low) - math.log(wide.low) == pytest.approx(m)
    bare, wide = evidence("tpot_rer", ws, 0.01, 5), evidence("tpot_rer", ws, 0.01, 5, m)
    assert wide.low < bare.low and wide.high > bare.high  # a saving: 1 - the ratio
    bare, wide = evidence("error_rate_delta", ws, 0.01, 5), \
        evidence("error_rate_delta", ws, 0.01, 5, m)
    assert (wide.low, wide.high) == (bare.low, bare.high)  # counts: no process term


def test_half_the_alpha_goes_to_the_process_term_one_margin_for_the_rollout() -> None:
    plan = StagePlan((5, 50, 100), 4, 40, 3)
    with_term, without = (StageMachine(policy(s), plan, ROLES, "test") for s in (0.02, 0.0))
    assert without.margin == 0.0
    assert with_term.alpha == pytest.approx(without.alpha * (1 - PROCESS_SHARE))
    z = NormalDist().inv_cdf(1 - 0.05 * PROCESS_SHARE / 2)
    assert with_term.margin == pytest.approx(z * math.sqrt(2) * 0.02)


def run(spread: float, speed: float, k: int = 40):
    m = StageMachine(policy(spread), StagePlan((5, 100), 4, k, 3), ROLES, "test")
    for w in windows(speed, k):
        status, _ = m.step(w)
        if status.verdict != "pending":
            break
    return m.status


def test_a_process_slower_by_chance_is_no_regression_with_the_term() -> None:
    # the same release on a process 5 % slower (2.5 sigma of u_B - u_A at tau 0.02): the
    # windows alone exclude 1 at once, and a tolerance of 1.10 leaves it undecided
    e2e = {f.check.name: f.check for f in run(0.0, 1.05, 6).figures}["e2e_ratio"]
    assert e2e.ci_low > 1.0
    e2e = {f.check.name: f.check for f in run(0.02, 1.05, 6).figures}["e2e_ratio"]
    assert e2e.ci_low <= 1.0 <= e2e.ci_high


def test_a_real_regression_still_rolls_back_and_a_fast_candidate_passes() -> None:
    slow = run(0.02, 1.5)
    assert slow.verdict == "fail" and slow.windows <= 6
    assert run(0.02, 0.95).verdict == "pass"
