"""The Locust user of a shadow replay. Loaded only by `locust -f` in its own process
(Locust monkey-patches the standard library): never import this module elsewhere.

The parent (`harness.replay.runner`) passes the plan in the environment variable
`LAYERGATE_REPLAY_PLAN` (JSON: run_dir, arms, models, timeout, closed_loop, users) and fills the
queue in the run's SQLite file. Each user loops: claim the next record (see `queue.py`),
sleep until its intended time (open loop; closed loop sends at once), send it to every
arm it still needs concurrently, write each `ArmResult` to the store and report it to
Locust's stats (`POST <arm>:<scenario>` for E2E, `TTFT <arm>:<scenario>` for TTFT).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import gevent
from locust import User, constant, task

from exporters.records import ArmResult
from exporters.traffic import TrafficRecord, read_traffic
from harness.replay import queue
from harness.replay.gevent_client import ArmClients
from harness.replay.tracing import arm_span, replay_tracer_provider
from harness.store import ResultStore

PLAN_ENV = "LAYERGATE_REPLAY_PLAN"
IDLE_S = 0.2  # how often a user with nothing to do looks at the queue again


@dataclass
class _Process:
    """Per-process state, opened lazily after Locust has forked its workers."""

    pid: int
    plan: dict[str, Any]
    records: dict[str, TrafficRecord]
    store: ResultStore
    worker: str
    arms: ArmClients  # one connection pool per arm, shared by the process's users
    tracer: Any  # one span per request and arm; its traceparent goes to the arm


_STATE: _Process | None = None


def _state() -> _Process:
    global _STATE
    if _STATE is None or _STATE.pid != os.getpid():
        plan = json.loads(os.environ[PLAN_ENV])
        traffic = read_traffic(os.path.join(plan["run_dir"], "traffic.jsonl"))
        store = ResultStore(os.path.join(plan["run_dir"], "results.sqlite"))
        queue.ensure_schema(store.conn)
        _STATE = _Process(os.getpid(), plan, {r.id: r for r in traffic.records}, store,
                          f"{socket.gethostname()}:{os.getpid()}",
                          ArmClients(plan["arms"], plan["timeout"], plan["users"]),
                          replay_tracer_provider().get_tracer("harness.replay"))
    return _STATE


class ShadowUser(User):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.proc = _state()

    @task
    def replay_next(self) -> None:
        proc = self.proc
        item = queue.claim(proc.store.conn, proc.worker)
        if item is None:
            gevent.sleep(IDLE_S)  # the parent stops Locust once every item is done
            return
        record = proc.records[item.request_id]
        intended_wall = time.time() if proc.plan["closed_loop"] else item.t0 + item.offset_s
        delay = intended_wall - time.time()
        if delay > 0:
            gevent.sleep(delay)
        intended = time.perf_counter() - (time.time() - intended_wall)
        # rotate which arm goes out first, so no arm is always first on the wire (an A/A
        # run must not show a systematic RER from send order alone)
        shift = item.seq % len(item.arms)
        arms = item.arms[shift:] + item.arms[:shift]
        jobs = [gevent.spawn(self._send, record, arm, intended) for arm in arms]
        gevent.joinall(jobs)
        for arm, job in zip(arms, jobs, strict=True):
            result = job.value if job.successful() else ArmResult(
                record.id, arm, record.scenario, ok=False, error=f"replayer: {job.exception!r}")
            proc.store.put(result, intended_at=intended_wall)
            self._report(result)
        queue.mark_done(proc.store.conn, item.seq)

    def _send(self, record: TrafficRecord, arm: str, intended: float) -> ArmResult:
        plan = self.proc.plan
        with arm_span(self.proc.tracer, record.id, record.scenario, arm,
                      record.endpoint) as span:
            result = self.proc.arms.send(record, arm, intended=intended,
                                         timeout=plan["timeout"], model=plan["models"].get(arm),
                                         headers=span.headers)
            span.finish(result)
        return result

    def _report(self, result: ArmResult) -> None:
        name = f"{result.arm}:{result.scenario}"
        fire = self.environment.events.request.fire
        error = None if result.ok else RuntimeError(result.error)
        fire(request_type="POST", name=name, response_time=(result.e2e_s or 0.0) * 1000,
             response_length=result.output_tokens, exception=error, context={})
        if result.ok and result.ttft_s is not None:
            fire(request_type="TTFT", name=name, response_time=result.ttft_s * 1000,
                 response_length=0, exception=None, context={})
