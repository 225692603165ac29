"""What a replay queues and what a Locust process is told, without Locust: pending-item
planning (fresh runs and `--resume`) and the worker plan handed over in the environment."""

from __future__ import annotations

import pytest

from layergate.exporters.traffic import TrafficRecord
from layergate.harness.replay.client import Target
from layergate.harness.replay.plan import pending_items
from layergate.harness.replay.work import LEASE_MARGIN_S, PLAN_ENV, WorkerPlan

ARMS = ("baseline", "baseline2", "candidate")


def records(*offsets: float) -> list[TrafficRecord]:
    return [TrafficRecord(f"r{i}", offset, "short", "/v1/completions", {"prompt": "x"})
            for i, offset in enumerate(offsets)]


def test_a_fresh_run_queues_every_record_for_every_arm_in_time_order() -> None:
    items = pending_items(records(5.0, 3.0, 4.0), ARMS, done=set())
    assert [e.record.id for e in items] == ["r1", "r2", "r0"]
    assert [e.offset_s for e in items] == [0.0, 1.0, 2.0]  # shifted to start at 0
    assert all(e.arms == ARMS for e in items)


def test_a_resume_queues_only_missing_arms_and_keeps_the_schedule() -> None:
    done = {("r0", "baseline"), ("r0", "baseline2"), ("r0", "candidate"),
            ("r1", "baseline"), ("r2", "candidate")}
    items = pending_items(records(0.0, 2.0, 6.0), ARMS, done, speed=2.0)
    assert [(e.record.id, e.arms) for e in items] == [
        ("r1", ("baseline2", "candidate")), ("r2", ("baseline", "baseline2"))]
    # the first missing record becomes offset 0; gaps divided by --speed
    assert [e.offset_s for e in items] == [0.0, 2.0]


def test_nothing_is_pending_when_every_pair_has_a_row() -> None:
    recs = records(0.0, 1.0)
    done = {(r.id, arm) for r in recs for arm in ARMS}
    assert pending_items(recs, ARMS, done) == []


def test_the_worker_plan_travels_in_the_environment() -> None:
    plan = WorkerPlan(arms={"baseline": "http://a:1", "candidate": "http://b:2/v"},
                      models={"candidate": "m"}, timeout=30.0, closed_loop=False, users=8,
                      run_dir="/tmp/run")
    env = plan.to_env()
    assert list(env) == [PLAN_ENV]
    again = WorkerPlan.from_env(env)
    assert again == plan
    assert again.targets == {"baseline": Target("baseline", "http://a:1"),
                             "candidate": Target("candidate", "http://b:2/v", "m")}
    assert again.lease_s == 30.0 + LEASE_MARGIN_S


def test_a_bare_worker_plan_has_no_run_directory() -> None:
    plan = WorkerPlan(arms={"baseline": "http://a"}, models={}, timeout=1.0,
                      closed_loop=True, users=1)
    assert WorkerPlan.from_env(plan.to_env()).run_dir is None


@pytest.mark.parametrize(("url", "endpoint", "expected"), [
    ("http://a:1", "/v1/completions", "http://a:1/v1/completions"),
    ("http://a:1/", "/v1/completions", "http://a:1/v1/completions"),
    ("http://a:1/prefix/", "/v1/chat/completions", "http://a:1/prefix/v1/chat/completions"),
])
def test_target_urls(url: str, endpoint: str, expected: str) -> None:
    assert Target("baseline", url).url_for(endpoint) == expected
