"""`layergate watch` driven as the two controllers really drive it: a Flagger replaying
`scheduler.go`'s call order every tick, and an Argo Rollouts AnalysisRun judging the
watch's `/status` as `webmetric.go` and `analysis.go` do (tests/support/controllers.py),
on synthetic windows fed to the watch's own board."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
import yaml
from prometheus_client import CollectorRegistry

from layergate.harness.watch.board import Board, Missing
from layergate.harness.watch.flagger import Payload, WeightReading
from layergate.harness.watch.journal import Journal
from layergate.harness.watch.policy import parse_watch_policy
from layergate.harness.watch.server import serve
from layergate.harness.watch.stages import StageMachine, StagePlan
from tests.support.controllers import AnalysisRun, FakeFlagger, Ticker
from tests.test_rollout_manifests import DIR
from tests.test_watch_decisions import POLICY, ROLES, window

STAGES = (5, 25, 50, 100)
WINDOW = 60.0


def _board(policy=POLICY, stages=STAGES, max_windows=40, journal: Journal | None = None
           ) -> Board:
    plan = StagePlan(stages, 4, max_windows, 3)
    return Board(lambda: StageMachine(policy, plan, ROLES, "test"), journal)


class Rig:
    """A board, a fake Flagger asking it, and a clock: window k ends at k * WINDOW, and
    Flagger ticks half a window after each (its `interval` equal to the window)."""

    def __init__(self, board: Board, seed: int = 0) -> None:
        self.board, self.k = board, 0
        self.rng = np.random.default_rng(seed)
        self.granted_from: list[tuple[int, tuple[float, ...]]] = []
        self.flagger = FakeFlagger(self._call, STAGES[:-1])

    def _call(self, hook: str, payload: dict, _timeout: float) -> tuple[int, None]:
        got = self.board.flagger(hook, Payload.parse(json.dumps(payload).encode()),
                                 now=self.k * WINDOW + WINDOW / 2)
        if hook == "confirm-traffic-increase" and got.code == 200:
            self.granted_from.append((self.flagger.weight,
                                      self.board.snapshot().status.history))
        return got.code, None

    def window(self, **candidate) -> None:
        self.k += 1
        end = self.k * WINDOW
        reading = WeightReading(self.flagger.weight, end - 1, "controller")
        if self.flagger.weight == 0:
            self.board.observe(Missing(end, "the candidate served 0 requests", True), reading)
        else:
            self.board.observe(window(self.rng, self.k, **candidate), reading)
        self.flagger.tick()

    def run(self, windows: int, **candidate) -> None:
        for _ in range(windows):
            if self.flagger.done:
                return
            self.window(**candidate)
            if self.flagger.phase == "WaitingPromotion" and self.flagger.calls[-1] == (
                    "confirm-promotion", 200):
                return


def _every_step_was_decided(rig: Rig) -> None:
    """A step from weight w was granted only once the watch had passed a stage >= w."""
    for weight, passed in rig.granted_from:
        assert weight == 0 or max(passed, default=0) >= weight, (weight, passed)


def test_identical_arms_are_promoted_through_every_step() -> None:
    rig = Rig(_board(), seed=1)
    rig.run(300)
    f = rig.flagger
    assert f.phase == "Succeeded" and f.failed_checks == 0 and f.rolled_back_by is None
    assert f.steps == [(0, 5), (5, 25), (25, 50)]  # each step exactly once, none skipped
    assert ("confirm-promotion", 200) in f.calls
    # the last step weight is asked for too, and granted: Flagger then asks to promote
    at_50 = [c for c in f.calls[f.calls.index(("confirm-promotion", 200)) - 1:]][:2]
    assert at_50 == [("confirm-traffic-increase", 200), ("confirm-promotion", 200)]
    _every_step_was_decided(rig)
    assert rig.board.snapshot().status.verdict == "pass"


def test_a_candidate_that_turns_slow_is_rolled_back_by_the_rollback_webhook() -> None:
    rig = Rig(_board(), seed=2)
    while rig.flagger.weight < 25 and not rig.flagger.done:
        rig.window()
    rig.run(100, slow=2.0)
    f = rig.flagger
    assert f.phase == "Failed" and f.rolled_back_by == "rollback webhook"
    assert f.failed_checks == 0  # the rollback hook acted first: no threshold needed
    assert f.steps == [(0, 5), (5, 25)]
    assert rig.board.snapshot().status.verdict == "fail"
    _every_step_was_decided(rig)


UNDECIDABLE = {"alpha": 0.05, "metrics": {  # identical arms never clear a 1.0 threshold
    "e2e_ratio": {"direction": "<=", "threshold": 1.0}}}


@pytest.mark.parametrize("action", ["hold", "rollback"])
def test_an_inconclusive_stage_holds_or_rolls_back_as_the_policy_says(action: str) -> None:
    policy = parse_watch_policy({**UNDECIDABLE, "inconclusive": action})
    rig = Rig(_board(policy, max_windows=8), seed=3)
    rig.run(40)
    f = rig.flagger
    assert rig.board.snapshot().status.verdict == "inconclusive"
    assert f.steps == [(0, 5)]
    if action == "hold":  # the weight stays; no failed check builds up; a person acts
        assert f.phase == "Progressing" and f.weight == 5 and f.failed_checks == 0
        assert ("rollback", 403) in f.calls and ("rollback", 200) not in f.calls
        assert f.calls[-2:] == [("rollout", 200), ("confirm-traffic-increase", 403)]
    else:
        assert f.phase == "Failed" and f.rolled_back_by == "rollback webhook"
        transitions = rig.board.snapshot().transitions
        assert [(t.decision, t.ends) for t in transitions] == [("rollback", "inconclusive")]


def test_a_new_checksum_starts_over_and_leaves_no_verdict_behind(tmp_path) -> None:
    journal = Journal.open(tmp_path / "state.json", {}, WINDOW)
    rig = Rig(_board(journal=journal), seed=4)
    while rig.flagger.weight < 25 and not rig.flagger.done:
        rig.window()
    rig.run(100, slow=2.0)
    assert rig.flagger.phase == "Failed"
    rig.flagger.new_revision("rev-2")  # a fixed candidate: a new revision
    rig.run(300)
    f = rig.flagger
    assert f.phase == "Succeeded" and f.steps[-3:] == [(0, 5), (5, 25), (25, 50)]
    assert rig.board.snapshot().status.verdict == "pass"
    events = [(e["event"], e["checksum"]) for e in journal.data["events"]]
    assert events == [("adopted", "rev-1"), ("reset", "rev-2")]
    assert journal.epoch == 1 and journal.revision == "rev-2"


def test_no_data_before_the_candidate_first_served_does_not_end_the_watch() -> None:
    board = _board()
    for k in range(10):  # canary pods still starting, Flagger still at 0 %
        board.observe(Missing(k * WINDOW, "no candidate series", candidate=True))
    status = board.snapshot().status
    assert status.verdict == "pending" and status.missing == 0 and status.waiting == 10
    rng = np.random.default_rng(5)
    board.observe(window(rng, 11))
    for k in range(3):
        board.observe(Missing((12 + k) * WINDOW, "no candidate series", candidate=True))
    assert board.snapshot().status.verdict == "no_data"
    assert board.flagger("rollback", Payload()).code == 200  # terminal no_data rolls back
    assert board.flagger("rollout", Payload()).code == 403


def test_a_lost_grant_is_granted_again_and_never_twice_from_a_stale_reading() -> None:
    board = _board()
    assert not board.flagger("confirm-traffic-increase", Payload(), now=5).grant  # no weight
    board.observe(Missing(6, "the candidate served 0 requests", True),
                  WeightReading(0, 1, "controller"))
    assert board.flagger("confirm-traffic-increase", Payload(), now=10).grant
    # the 200 was lost: Flagger is still at 0 and asks again; no reading since: wait
    assert board.flagger("confirm-traffic-increase", Payload(), now=20).code == 403
    board.observe(Missing(60, "the candidate served 0 requests", True),
                  WeightReading(0, 55, "controller"))
    assert board.flagger("confirm-traffic-increase", Payload(), now=70).code == 200
    assert len(board.journal.data["grants"]) == 2


def test_the_payload_is_read_and_webhooks_are_post_only() -> None:
    board = _board()
    server = serve(board, CollectorRegistry(), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.port}"
    try:
        got = httpx.get(f"{base}/flagger/confirm-traffic-increase")
        assert got.status_code == 405 and got.headers["allow"] == "POST"
        assert board.journal.data["grants"] == []  # a GET used up nothing
        assert httpx.post(f"{base}/flagger/rollout", content=b"{not json").status_code == 400
        assert httpx.post(f"{base}/flagger/nope", json={}).status_code == 404
        got = httpx.post(f"{base}/flagger/rollout", json={
            "name": "llm", "namespace": "prod", "phase": "Progressing", "checksum": "abc"})
        assert got.status_code == 200
        answer = board.journal.data["answers"][-1]
        assert (answer["name"], answer["namespace"], answer["phase"], answer["checksum"]) \
            == ("llm", "prod", "Progressing", "abc")
        assert board.journal.revision == "abc"
        assert httpx.post(f"{base}/status").status_code == 405
    finally:
        server.stop()


@pytest.fixture
def argo_metric() -> dict:
    docs = {d["kind"]: d for d in yaml.safe_load_all((DIR / "argo-rollouts.yaml").read_text())}
    return docs["AnalysisTemplate"]["spec"]["metrics"][0]


def _argo(board: Board, metric: dict, stages, seed: int, slow_from: float | None
          ) -> Iterator[tuple[float, str]]:
    """Each Rollout step: setWeight, then an AnalysisRun of the template at that stage, one
    measurement per window; yields (stage, the run's phase) until one does not succeed."""
    server = serve(board, CollectorRegistry(), "127.0.0.1", 0)
    port = server.port
    rng = np.random.default_rng(seed)
    k = 0
    try:
        for stage in stages:
            url = metric["provider"]["web"]["url"].replace("{{args.stage}}", f"{stage:g}")
            url = url.replace("{{args.revision}}", "rev-1")
            url = url.replace("layergate-watch.llm.svc:9105", f"127.0.0.1:{port}")

            def fetch(url=url) -> tuple[int, bytes]:
                got = httpx.get(url, timeout=5)
                return got.status_code, got.content

            run = AnalysisRun(metric, fetch)
            phase = "Running"
            while phase == "Running":
                k += 1
                slow = 2.0 if slow_from is not None and stage >= slow_from else 1.0
                board.observe(window(rng, k, slow=slow))
                phase = run.measure()
            yield stage, phase
            if phase != "Successful":
                return
    finally:
        server.stop()


def test_an_argo_analysis_run_succeeds_for_identical_arms(argo_metric: dict) -> None:
    board = _board()
    got = list(_argo(board, argo_metric, STAGES[:-1], seed=6, slow_from=None))
    assert got == [(5, "Successful"), (25, "Successful"), (50, "Successful")]
    assert board.snapshot().status.verdict == "pass"
    assert [a["stage_verdict"] for a in board.journal.data["answers"]].count("pass") == 3


def test_an_argo_analysis_run_fails_for_a_slow_candidate(argo_metric: dict) -> None:
    board = _board()
    got = list(_argo(board, argo_metric, STAGES[:-1], seed=7, slow_from=25))
    assert got == [(5, "Successful"), (25, "Failed")]
    assert board.snapshot().status.verdict == "fail"


def test_an_argo_analysis_run_of_an_inconclusive_stage_pauses(argo_metric: dict) -> None:
    board = _board(parse_watch_policy(UNDECIDABLE), max_windows=8)
    metric = {**argo_metric, "inconclusiveLimit": 10}
    got = list(_argo(board, metric, STAGES[:-1], seed=8, slow_from=None))
    assert got == [(5, "Inconclusive")]  # Argo pauses the rollout for a person


def test_a_stage_counts_only_windows_served_at_its_weight() -> None:
    """Flagger suspended at 25 % (no more ticks): the watch passes stage 25 and then holds,
    never judging stage 50 on windows served at 25 %; resumed, it steps and goes on."""
    rig = Rig(_board(), seed=11)
    while rig.flagger.weight < 25:
        rig.window()
    rig.flagger.suspend = True
    rig.run(40)
    status = rig.board.snapshot().status
    assert status.history == (5, 25) and status.stage == 50 and status.windows == 0
    assert status.verdict == "pending" and status.held_at == 25
    assert 0 < status.held < 40 and rig.flagger.skipped == 40
    rig.flagger.suspend = False
    rig.run(300)
    f = rig.flagger
    assert f.phase == "Succeeded" and f.steps == [(0, 5), (5, 25), (25, 50)]
    _every_step_was_decided(rig)


def test_a_grant_lost_after_the_verdict_is_granted_again_from_a_later_reading() -> None:
    """The verdict is in (no window is judged any more), Flagger at 50 % lost the 200 of
    its last confirm-traffic-increase: the weight is still read, so it is granted again."""
    rig = Rig(_board(), seed=12)
    while rig.board.snapshot().status.verdict != "pass":
        rig.window()
    board, t = rig.board, (rig.k + 1) * WINDOW  # after every grant the rig made
    board.read_weight(WeightReading(50, t, "controller"))
    assert board.flagger("confirm-traffic-increase", Payload(), now=t + 1).grant
    # lost: Flagger asks again; no newer reading yet, then one comes with the next window
    assert board.flagger("confirm-traffic-increase", Payload(), now=t + 2).code == 403
    board.read_weight(WeightReading(50, t + WINDOW, "controller"))
    assert board.flagger("confirm-traffic-increase", Payload(), now=t + WINDOW + 1).grant
    assert board.flagger("confirm-promotion", Payload()).code == 200


def test_an_argo_revision_starts_over_and_an_unknown_one_never_reads_pass(tmp_path) -> None:
    journal = Journal.open(tmp_path / "state.json", {}, WINDOW)
    board = _board(journal=journal)
    rng = np.random.default_rng(13)
    k = 0
    assert board.argo(5, "hash-a")["stage_verdict"] == "pending"  # adopted: nothing yet
    while board.snapshot().status.verdict == "pending":
        k += 1
        board.observe(window(rng, k))
    assert board.argo(50, "hash-a")["stage_verdict"] == "pass"
    for stage in (5, 25, 50):  # a new hash: a new rollout, nothing carried over
        assert board.argo(stage, "hash-b")["stage_verdict"] == "pending"
    assert journal.revision == "hash-b" and journal.epoch == 1
    # a watch that decided with no revision named: the first hash named is no verdict of it
    other = _board()
    while other.snapshot().status.verdict == "pending":
        k += 1
        other.observe(window(rng, k))
    assert other.argo(50)["stage_verdict"] == "pass"
    assert other.argo(50, "hash-c")["stage_verdict"] == "pending"


def test_a_manual_promotion_gate_waits_without_failed_checks() -> None:
    """A second confirm-promotion webhook (Flagger's load tester gate, closed): Flagger
    waits in WaitingPromotion with the watch's pass, builds no failed checks, and promotes
    once a person opens the gate."""
    rig = Rig(_board(), seed=14)
    gate = {"open": False}
    ask = rig.flagger.attempt

    def attempt(hook: str, payload: dict, timeout: float) -> tuple[int, None]:
        code, _ = ask(hook, payload, timeout)
        if hook == "confirm-promotion" and code == 200 and not gate["open"]:
            return 403, None  # runConfirmPromotionHooks: any "no" is no
        return code, None

    rig.flagger.attempt = attempt
    rig.run(300)
    f = rig.flagger
    assert f.phase == "WaitingPromotion" and f.failed_checks == 0 and f.weight == 50
    gate["open"] = True
    rig.run(5)
    assert f.phase == "Succeeded" and f.failed_checks == 0


def test_a_scrape_gap_after_the_candidate_served_is_no_weight_of_zero() -> None:
    """A window where the candidate's series are missing reads as a 0 % share only before
    it first served (Flagger still at 0); later it is a gap, and no step is granted on it."""
    board = _board()
    rng = np.random.default_rng(15)
    board.observe(Missing(WINDOW, "no candidate series", True),
                  WeightReading(0, 1, "observed"))
    assert board.flagger("confirm-traffic-increase", Payload(), now=2).grant  # onto 5 %
    board.observe(window(rng, 2), WeightReading(5.2, 2 * WINDOW, "observed"))
    board.observe(Missing(3 * WINDOW, "no candidate series", True),
                  WeightReading(0, 3 * WINDOW, "observed"))
    got = board.flagger("confirm-traffic-increase", Payload(), now=3 * WINDOW + 1)
    assert got.code == 403 and "stage 5 % not decided" in got.message, got.message


def test_the_ticker_drops_ticks_as_gos_time_ticker_does() -> None:
    """On a simulated clock: a tick whose call blocks 3.5 intervals finds one tick waiting
    (taken at once when it returns) and two dropped; the grid stays start + k * interval."""
    now = [0.0]
    calls: list[float] = []

    def fn() -> None:
        calls.append(now[0])
        now[0] += 3.5 if len(calls) == 2 else 0.1

    def wait(seconds: float) -> bool:
        now[0] += seconds
        return False

    ticker = Ticker(fn, 1.0, until=lambda: len(calls) >= 6, clock=lambda: now[0], wait=wait)
    ticker.run()
    assert ticker.error is None
    assert calls == pytest.approx([0.0, 1.0, 4.5, 5.0, 6.0, 7.0])
    assert ticker.dropped == 2
