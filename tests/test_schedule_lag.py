"""Schedule fidelity without a replay: the lag quantiles, the store's column, the policy
key, and the gate's check in each of its states."""

from __future__ import annotations

import pytest

from layergate.exporters.catalogue import SCHEDULE_LAG
from layergate.exporters.figures.schedule_lag import schedule_lag
from layergate.exporters.records import ArmResult
from layergate.harness.gate.fixed.schedule import schedule_check
from layergate.harness.gate.policy import PolicyError, default_policy_dir, load_policy, parse_policy
from layergate.harness.store import ResultStore

RULES = {"metrics": {"exact_match": {"threshold": -0.1}}}


def rows(lags: list[float | None]) -> list[ArmResult]:
    return [ArmResult(f"r{i}", "baseline", "s", ok=True, send_lag_s=lag)
            for i, lag in enumerate(lags)]


def test_quantiles_of_the_recorded_lags() -> None:
    lag = schedule_lag([0.001 * i for i in range(101)] + [None])
    assert (lag.n, lag.p50_s, lag.p99_s, lag.max_s) == (101, 0.05, 0.099, 0.1)
    assert "p50 50.0 ms" in lag.words() and "max 100.0 ms" in lag.words()
    assert schedule_lag([None, None]) is None


def test_the_store_keeps_each_send_lag(tmp_path) -> None:
    with ResultStore(tmp_path / "results.sqlite") as store:
        for row in rows([0.25, None]):
            store.put(row)
        assert [r.send_lag_s for r in store.results()] == [0.25, None]
        assert store.send_lags() == [0.25]


def test_the_policy_key_is_checked_and_shipped() -> None:
    assert parse_policy(RULES).max_send_lag_p99_s is None
    assert parse_policy({**RULES, "max_send_lag_p99_s": 0.2}).max_send_lag_p99_s == 0.2
    with pytest.raises(PolicyError, match="max_send_lag_p99_s: must be > 0"):
        parse_policy({**RULES, "max_send_lag_p99_s": 0})
    with pytest.raises(PolicyError, match="max_send_lag_p99_s"):
        parse_policy({**RULES, "max_send_lag_p99_s": "fast"})
    for name in ("no-regression", "default", "strict"):
        assert load_policy(default_policy_dir() / f"{name}.yaml").max_send_lag_p99_s == 1.0


@pytest.mark.parametrize(("bound", "lags", "status", "gating"), [
    (0.5, [None] * 3, "skipped", False),  # a run older than the field
    (None, [0.01, 2.0], "info", False),  # no bound: shown, not judged
    (0.5, [0.01] * 99 + [2.0], "pass", True),  # one late send: p99 still within
    (0.5, [0.01] * 50 + [2.0] * 50, "inconclusive", True)])
def test_the_check_in_each_state(bound, lags, status, gating) -> None:
    policy = parse_policy({**RULES, **({"max_send_lag_p99_s": bound} if bound else {})})
    check = schedule_check(policy, schedule_lag(lags))
    assert (check.name, check.arm, check.status, check.gating) == (SCHEDULE_LAG, "all", status,
                                                                  gating)
    if status == "inconclusive":
        assert "the load tool, not the arms, was the limit" in check.reason
