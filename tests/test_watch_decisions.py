"""The staged-rollout decision of `layergate watch`, fed windows directly: when it rolls
back, advances, gives up, or has no data, and what hooks, Flagger and Argo are told."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from layergate.exporters.catalogue import LIVE_FIGURES
from layergate.exporters.figures.canary import ArmWindow, Window, evidence
from layergate.harness.policy_file import PolicyError
from layergate.harness.watch.board import Board, Missing
from layergate.harness.watch.exposition import WatchCollector
from layergate.harness.watch.flagger import Payload, WeightReading
from layergate.harness.watch.hooks import Hooks, hook_env
from layergate.harness.watch.journal import Journal
from layergate.harness.watch.loop import WatchOutcome, _hook_error
from layergate.harness.watch.policy import parse_watch_policy
from layergate.harness.watch.stages import StageMachine, StagePlan, Transition

ROLES = {"e2e", "ttft", "tpot", "requests", "errors"}
# the stage mechanics, without the between-process margin (a whole-rollout offset these
# windows do not draw: tests/test_watch_process_spread.py holds the margin)
POLICY = parse_watch_policy({"alpha": 0.05, "process_spread": 0, "metrics": {
    "e2e_ratio": {"direction": "<=", "threshold": 1.10},
    "error_rate_delta": {"direction": "<=", "threshold": 0.02},
    "tpot_rer": {"direction": ">=", "threshold": 0.0, "critical": False}}})


def arm(rng: np.random.Generator, n: int = 400, slow: float = 1.0,
        errors: float = 0.0) -> ArmWindow:
    x = rng.lognormal(math.log(2.0 * slow), 0.5, n)
    t = rng.lognormal(math.log(0.03 * slow), 0.2, n)
    return ArmWindow({"e2e_sum": float(x.sum()), "e2e_count": float(n),
                      "tpot_sum": float(t.sum()), "tpot_count": float(n),
                      "requests": float(n), "errors": float(rng.binomial(n, errors))})


def window(rng: np.random.Generator, k: int = 0, **candidate) -> Window:
    return Window(k, k + 60, arm(rng), arm(rng, **candidate))


def machine(stages=(5, 50, 100), min_windows=4, max_windows=40, no_data=3,
            policy=POLICY) -> StageMachine:
    return StageMachine(policy, StagePlan(stages, min_windows, max_windows, no_data), ROLES,
                        "test")


def memory() -> Journal:
    return Journal.open(None, {}, 0.0)


def run(m: StageMachine, rng: np.random.Generator, windows: int, **candidate):
    transitions = []
    for k in range(windows):
        status, t = m.step(window(rng, k, **candidate))
        if t is not None:
            transitions.append(t)
        if status.verdict != "pending":
            break
    return m.status, transitions


def test_identical_arms_advance_through_every_stage_and_pass() -> None:
    status, transitions = run(machine(), np.random.default_rng(1), 200)
    assert status.verdict == "pass" and status.exit_code == 0
    assert [(t.decision, t.stage, t.next_stage) for t in transitions] == [
        ("advance", 5, 50), ("advance", 50, 100)]
    assert transitions[-1].final and not transitions[0].final
    assert status.history == (5, 50)
    assert all(r.split(":")[0] in ("e2e_ratio", "error_rate_delta") for r in status.reasons)


def test_a_stage_never_advances_before_its_minimum_windows() -> None:
    m = machine(min_windows=12)
    rng = np.random.default_rng(2)
    for k in range(11):
        status, t = m.step(window(rng, k))
        assert t is None and status.stage == 5
    _, t = m.step(window(rng, 11))
    assert t is not None and t.decision == "advance"


def test_a_slower_candidate_rolls_back_at_once_with_the_figure_named() -> None:
    status, transitions = run(machine(min_windows=30), np.random.default_rng(3), 30, slow=1.5)
    assert status.verdict == "fail" and status.exit_code == 1
    assert [(t.decision, t.stage, t.next_stage) for t in transitions] == [("rollback", 5, 0)]
    assert status.windows < 30  # before the stage's minimum: bad is acted on at once
    assert status.reasons[0].startswith("e2e_ratio: ") and "bad side of <= 1.1" in \
        status.reasons[0]


def test_more_errors_roll_back_on_the_error_rate() -> None:
    status, _ = run(machine(), np.random.default_rng(4), 40, errors=0.08)
    assert status.verdict == "fail"
    assert status.reasons[0].startswith("error_rate_delta: ")


def test_a_turn_mid_stage_is_caught_by_an_interval_restarted_after_it() -> None:
    rng = np.random.default_rng(5)
    m = machine(min_windows=1000, max_windows=1000)
    for k in range(20):
        m.step(window(rng, k))
    for k in range(20, 60):
        status, t = m.step(window(rng, k, slow=1.3))
        if t is not None:
            break
    assert status.verdict == "fail"
    assert "over windows" in status.reasons[0], status.reasons
    assert status.windows - 20 <= 12


def test_undecided_until_the_last_window_is_inconclusive() -> None:
    # a ratio sitting on the threshold can be decided neither way
    status, transitions = run(machine(max_windows=8), np.random.default_rng(6), 50, slow=1.1)
    assert status.verdict == "inconclusive" and status.exit_code == 3 and not transitions
    assert status.reasons[0] == "stage 5 %: 8 windows and still undecided"
    assert any(r.startswith("e2e_ratio: ") for r in status.reasons[1:])


def test_no_data_is_its_own_state_and_never_a_pass() -> None:
    m = machine(no_data=3)
    rng = np.random.default_rng(7)
    m.step(window(rng))
    status, _ = m.step(None, "Prometheus at http://p:9090 did not answer")
    assert (status.verdict, status.state, status.missing) == ("pending", "no_data", 1)
    assert status.exit_code == 4  # stopped now: the last window had no data
    status, _ = m.step(window(rng))  # data again: the count starts over
    assert (status.state, status.missing, status.windows) == ("watching", 0, 2)
    for _ in range(3):
        status, t = m.step(None, "the candidate served 0 requests in the window")
        assert t is None
    assert status.verdict == "no_data" and status.exit_code == 4
    assert "no data for 3 windows in a row at stage 5 %" in status.reasons[0]
    assert m.step(window(rng))[0].verdict == "no_data"  # final


def test_a_figure_without_data_keeps_the_stage_from_advancing() -> None:
    """Windows with traffic but no latency histogram sums (e.g. every request failed):
    nothing is decided good, so nothing advances."""
    m = machine(max_windows=6)
    empty = ArmWindow({"requests": 50.0, "errors": 0.0})
    for k in range(6):
        status, t = m.step(Window(k, k + 1, empty, empty))
        assert t is None
    assert status.verdict == "inconclusive"
    assert "e2e_ratio: insufficient: no window with data for it yet" in status.reasons


def test_the_error_budget_is_split_over_stages_and_critical_figures() -> None:
    m = machine(stages=(1, 5, 25, 50, 100))
    assert m.alpha == pytest.approx(0.05 / (4 * 2))


def test_an_engine_without_a_gated_metric_is_refused_at_start() -> None:
    policy = parse_watch_policy({"metrics": {"ttft_ratio": {"direction": "<=",
                                                            "threshold": 1.1}}})
    with pytest.raises(PolicyError, match="metrics.ttft_ratio: critical and required, but "
                                          "engine tgi exposes no ttft metric"):
        StageMachine(policy, StagePlan(), {"e2e", "tpot", "requests", "successes"}, "tgi")


@pytest.mark.parametrize(("raw", "message"), [
    ({"metrics": {"exact_match": {"direction": ">=", "threshold": 0}}},
     "'exact_match' is a figure of `layergate gate`: it needs a shadow replay"),
    ({"metrics": {"e2e_ratoi": {"direction": "<=", "threshold": 1}}},
     "did you mean 'e2e_ratio'"),
    ({"metrics": {"e2e_ratio": {"direction": "<="}}}, "metrics.e2e_ratio.threshold: missing"),
    ({"metrics": {"e2e_ratio": {"direction": "<", "threshold": 1}}}, "expected '>=' or '<='"),
    ({"alpha": 1.5, "metrics": {"e2e_ratio": {"direction": "<=", "threshold": 1}}},
     "alpha: expected 0 < alpha < 1"),
    ({"metrics": {"e2e_ratio": {"direction": "<=", "threshold": 1, "critical": False}}},
     "no critical figure"),
])
def test_policy_mistakes_name_the_key(raw: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_watch_policy(raw)


def test_rer_is_one_minus_the_tpot_ratio_with_its_interval_flipped() -> None:
    rng = np.random.default_rng(8)
    windows = [window(rng, k, slow=0.8) for k in range(12)]
    ratio = evidence("tpot_ratio", windows, 0.05, 5)
    rer = evidence("tpot_rer", windows, 0.05, 5)
    assert rer.estimate == pytest.approx(1 - ratio.estimate)
    assert (rer.low, rer.high) == pytest.approx((1 - ratio.high, 1 - ratio.low))
    assert 0.1 < rer.low < 0.2 < rer.high < 0.3
    assert len(rer.history) == 12 and LIVE_FIGURES["tpot_rer"].unit == "fraction"


def flagger(board: Board, hook: str, now: float = 0.0) -> int:
    return board.flagger(hook, Payload(), now).code


def test_flagger_and_argo_answers_follow_the_stages() -> None:
    rng = np.random.default_rng(9)
    board = Board(machine)
    assert flagger(board, "confirm-traffic-increase", 1) == 403  # no weight seen yet
    board.observe(Missing(60, "the candidate served 0 requests", True),
                  WeightReading(0, 1, "observed"))
    assert flagger(board, "confirm-traffic-increase", 2) == 200  # onto stage 5
    assert flagger(board, "confirm-traffic-increase", 3) == 403  # no newer weight seen
    assert flagger(board, "rollout") == 200
    assert flagger(board, "rollback") == 403
    k = 10
    while board.snapshot().status.stage == 5:
        board.observe(window(rng, k), WeightReading(5, k, "observed"))
        k += 1
    assert board.stage_verdict(5) == "pass" and board.stage_verdict(50) == "pending"
    assert flagger(board, "confirm-traffic-increase", k) == 200  # onto stage 50
    assert flagger(board, "confirm-traffic-increase", k + 1) == 403
    assert flagger(board, "confirm-promotion") == 403
    board.observe(Missing(k, "Prometheus down"))
    code = board.flagger("rollout", Payload())
    assert code.code == 200 and board.snapshot().status.state == "no_data"  # a gap: no check
    while board.snapshot().status.verdict == "pending":
        board.observe(window(rng, slow=2.0))
    assert board.stage_verdict(50) == "fail" and board.stage_verdict(5) == "pass"
    assert flagger(board, "rollback") == 200
    assert flagger(board, "rollout") == 403
    body = board.to_json(50)
    assert body["verdict"] == "fail" and body["stage_verdict"] == "fail"
    assert body["figures"]["e2e_ratio"]["decision"] == -1
    assert [t["decision"] for t in body["transitions"]] == ["advance", "rollback"]


def test_the_collector_exports_state_stage_and_figures() -> None:
    rng = np.random.default_rng(10)
    board = Board(machine)
    for k in range(5):
        board.observe(window(rng, k, slow=2.0))
    registry = CollectorRegistry()
    registry.register(WatchCollector(board))
    get = registry.get_sample_value
    assert get("layergate_watch_state", {"state": "fail"}) == 1.0
    assert get("layergate_watch_state", {"state": "watching"}) == 0.0
    assert get("layergate_watch_stage_percent") == 5.0
    assert get("layergate_watch_figure_threshold", {"figure": "e2e_ratio"}) == 1.1
    assert get("layergate_watch_figure_decision", {"figure": "e2e_ratio"}) == -1.0
    assert get("layergate_watch_figure_low", {"figure": "e2e_ratio"}) > 1.1
    assert get("layergate_watch_transitions_total", {"decision": "rollback"}) == 1.0


def test_hooks_run_once_per_transition_with_stage_and_reasons(tmp_path) -> None:
    log = tmp_path / "calls"
    cmd = (f'printf "%s|%s|%s|%s\\n" "$LAYERGATE_WATCH_DECISION" "$LAYERGATE_WATCH_STAGE" '
           f'"$LAYERGATE_WATCH_NEXT_STAGE" "$LAYERGATE_WATCH_EXIT_CODE" >> {log}; '
           f'printf "%s" "$LAYERGATE_WATCH_REASONS" > {tmp_path}/reasons')
    hooks = Hooks(cmd, cmd, memory())
    advance = Transition("advance", 5, 25, ("e2e_ratio: fine",))
    rollback = Transition("rollback", 25, 0, ("e2e_ratio: worse", "error_rate_delta: worse"))
    assert hooks.run(advance).ok
    assert hooks.run(advance) is None  # asked twice: still once
    assert hooks.run(rollback).ok
    assert log.read_text().splitlines() == ["advance|5|25|", "rollback|25|0|1"]
    assert (tmp_path / "reasons").read_text() == "e2e_ratio: worse\nerror_rate_delta: worse"
    assert hook_env(Transition("advance", 50, 100, ()))["LAYERGATE_WATCH_EXIT_CODE"] == "0"
    assert Hooks(None, None, memory()).run(rollback) is None


def test_a_failing_hook_ends_the_watch_as_an_infrastructure_error() -> None:
    hooks = Hooks(None, "echo cannot reach the cluster >&2; exit 7", memory())
    t = Transition("rollback", 5, 0, ("e2e_ratio: worse",))
    error = _hook_error(t, hooks.run(t))
    assert error.startswith("--on-rollback exited 7 after the watch decided to rollback at "
                            "stage 5 %")
    assert "cannot reach the cluster" in error
    m = machine()
    assert WatchOutcome(m.status, Board(machine), error).exit_code == 4
    slow = Hooks(None, "echo started; sleep 5", memory(), timeout=0.5)
    error = _hook_error(t, slow.run(t))
    assert "timed out" in error and "started" in error
    assert "PATH" in os.environ  # hooks inherit the environment
