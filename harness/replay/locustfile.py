"""The Locust user of a shadow replay. Loaded only by `locust -f` in its own process
(Locust monkey-patches the standard library): never import this module elsewhere.

The parent (`harness.replay.runner`) hands over a `WorkerPlan` in the environment and the
work in the run's queue. Each user loops: claim the next record from the `WorkSource`,
sleep until it is due (open loop; closed loop sends at once), send it to every arm it still
needs concurrently (`client.send` over the gevent transport), hand the results back and
report them to Locust's stats (`POST <arm>:<scenario>` for E2E, `TTFT <arm>:<scenario>`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import gevent
from locust import User, constant, task

from exporters.records import ArmResult
from exporters.traffic import TrafficRecord
from harness.replay.client import Target, send
from harness.replay.gevent_transport import GeventTransport
from harness.replay.tracing import arm_span, replay_tracer_provider
from harness.replay.work import StoreWork, WorkerPlan, WorkSource
from harness.rundir import RunDir
from harness.store import this_process

IDLE_S = 0.2  # how often a user with nothing to do looks at the queue again


@dataclass
class _Process:
    """Per-process state, opened lazily after Locust has forked its workers."""

    pid: int
    plan: WorkerPlan
    targets: dict[str, Target]
    work: WorkSource
    transport: GeventTransport  # connection pools shared by the process's users
    tracer: Any  # one span per request and arm; its traceparent goes to the arm


_STATE: _Process | None = None


def _state() -> _Process:
    global _STATE
    if _STATE is None or _STATE.pid != os.getpid():
        plan = WorkerPlan.from_env(os.environ)
        if plan.run_dir is None:
            raise RuntimeError("this Locust process got no run directory to claim work from "
                               "(a worker fed by a master is not built yet)")
        work = StoreWork(RunDir(plan.run_dir), this_process(), plan.lease_s)
        _STATE = _Process(os.getpid(), plan, plan.targets, work,
                          GeventTransport(concurrency=plan.users * len(plan.arms),
                                          network_timeout=plan.timeout),
                          replay_tracer_provider().get_tracer("harness.replay"))
    return _STATE


class ShadowUser(User):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.proc = _state()

    @task
    def replay_next(self) -> None:
        proc = self.proc
        item = proc.work.claim()
        if item is None:
            gevent.sleep(IDLE_S)  # the parent stops Locust once every item is done
            return
        record = item.record
        intended_wall = time.time() if proc.plan.closed_loop else item.due_at
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
        results = [job.value if job.successful() else ArmResult(
            record.id, arm, record.scenario, ok=False, error=f"replayer: {job.exception!r}")
            for arm, job in zip(arms, jobs, strict=True)]
        if proc.work.complete(item, results, intended_wall):
            for result in results:
                self._report(result)

    def _send(self, record: TrafficRecord, arm: str, intended: float) -> ArmResult:
        proc = self.proc
        with arm_span(proc.tracer, record.id, record.scenario, arm, record.endpoint) as span:
            result = send(proc.transport, proc.targets[arm], record, intended=intended,
                          timeout=proc.plan.timeout, headers=span.headers)
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
