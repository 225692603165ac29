"""The Locust user of a shadow replay. Loaded only by `locust -f` in its own process
(Locust monkey-patches the standard library): never import this module elsewhere.

Master: the parent (`layergate.harness.replay.runner`) hands Locust's master a `WorkerPlan` in the
environment; at `init` the master opens the run's store and serves work and takes results
over Locust's messages (`WorkMaster`). Worker (local or on another host): at `init` it says
hello to the master and waits for the plan; it owns nothing on disk (`ChannelWork`). A
Locust process run alone claims straight from the store (`StoreWork`).

Each user loops: claim the next record from the `WorkSource`, sleep until it is due (open
loop; closed loop sends at once), send it to every arm it still needs concurrently
(`client.send` over the gevent transport), hand the results back and, once they are kept,
report them to Locust's stats (`POST <arm>:<scenario>` for E2E, `TTFT <arm>:<scenario>`),
which Locust sums on the master (web UI, CSV).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gevent
from gevent import GreenletExit
from locust import User, constant, events, task
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.replay.auth import TOKEN_ENV
from layergate.harness.replay.channel import HELLO, RESULTS, TURN, WANT
from layergate.harness.replay.channel_work import ChannelWork, worker_clock
from layergate.harness.replay.client import Target, send
from layergate.harness.replay.gevent_transport import GeventTransport
from layergate.harness.replay.own import Ended, NeedsTools, ask_simulator, own_messages
from layergate.harness.replay.tracing import arm_span, replay_tracer
from layergate.harness.replay.work import StoreWork, WorkerPlan, WorkSource
from layergate.harness.replay.workers import NAME_ENV, PROCESSES_ENV
from layergate.harness.store.items import TurnDone, WorkItem

if TYPE_CHECKING:  # the master's own modules, imported by the master only (see `_on_init`)
    from layergate.harness.replay.master import WorkMaster

IDLE_S = 0.2  # how often a user with nothing to do looks for work again
CHECK_WORKERS_S = 1.0  # how often the master looks for workers Locust lost


@dataclass
class _Process:
    """Per-process state, opened lazily after Locust has forked its workers."""

    pid: int
    plan: WorkerPlan
    targets: dict[str, Target]
    work: WorkSource
    transport: GeventTransport  # connection pools shared by the process's users
    tracer: Any  # one span per request and arm (None: not exported, a traceparent only)


_STATE: _Process | None = None
_CHANNEL: ChannelWork | None = None
_MASTER: WorkMaster | None = None
_QUITTING = False


def _worker_name() -> str:
    from layergate.harness.store.rows import this_process

    name = os.environ.get(NAME_ENV) or this_process()
    if int(os.environ.get(PROCESSES_ENV, "1")) > 1 and os.environ.get(NAME_ENV):
        name += f":{os.getpid()}"  # forked siblings share the given name
    return name


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    global _CHANNEL, _MASTER
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        # a worker never writes the store: only the master imports what does
        from layergate.harness.replay.master import WorkMaster
        from layergate.harness.rundir import RunDir

        plan = WorkerPlan.from_env(os.environ)

        def connected(client_id: str) -> bool:
            node = runner.clients.get(client_id)
            return node is not None and node.state != STATE_MISSING

        options = environment.parsed_options
        master = _MASTER = WorkMaster(
            RunDir(plan.run_dir), plan,
            lambda kind, data, cid: runner.send_message(kind, data, cid), connected,
            plan.max_clock_skew_s,
            start=lambda: gevent.spawn(runner.start, options.num_users, options.spawn_rate),
            disconnect=lambda cid: _disconnect(runner, cid),
            token=os.environ.get(TOKEN_ENV) or None)
        for kind, handler in ((HELLO, master.hello), (WANT, master.want),
                              (RESULTS, master.results), (TURN, master.turn)):
            runner.register_message(kind, _from_worker(handler))
        gevent.spawn(_watch_workers, master)
        if plan.worker_wait_s > 0:
            gevent.spawn_later(plan.worker_wait_s, _give_up, environment, master)
        # Locust's master stops the test when its last worker quits or goes missing, and
        # would then wait for ever: end the process, so the parent marks the run interrupted
        environment.events.test_stop.add_listener(lambda **_: gevent.spawn(_quit, runner))
    elif isinstance(runner, WorkerRunner):
        _CHANNEL = ChannelWork(runner, _worker_name())
        _CHANNEL.hello()


def _quit(runner: Any) -> None:
    global _QUITTING
    if not _QUITTING:
        _QUITTING = True
        runner.quit()
        web_ui = getattr(runner.environment, "web_ui", None)
        if web_ui is not None:  # the process lives as long as its web UI: end it too
            web_ui.stop()


def _disconnect(runner: Any, client_id: str) -> None:
    """Drop a refused worker from Locust's workers, as Locust's own `quit` handling does,
    so it never counts toward the start and never gets users."""
    node = runner.clients.pop(client_id, None)
    dispatcher = getattr(runner, "_users_dispatcher", None)
    if node is not None and dispatcher is not None:
        dispatcher.remove_worker(node)


def _give_up(environment: Any, master: WorkMaster) -> None:
    if master.started is None:
        master.give_up()
        # the parent reads why from workers.json
        environment.process_exit_code = ExitCode.INFRASTRUCTURE
        _quit(environment.runner)


def _from_worker(handler: Any) -> Any:
    return lambda environment, msg, **_: handler(msg.node_id, msg.data)


def _watch_workers(master: WorkMaster) -> None:
    while True:
        gevent.sleep(CHECK_WORKERS_S)
        master.check_workers()


@events.quitting.add_listener
def _on_quitting(environment: Any, **_: Any) -> None:
    if _MASTER is not None:
        _MASTER.close()


def _state() -> _Process:
    global _STATE
    if _STATE is None or _STATE.pid != os.getpid():
        work: WorkSource
        if _CHANNEL is not None:
            plan = _CHANNEL.wait_ready()
            work = _CHANNEL
        else:
            plan = WorkerPlan.from_env(os.environ)
            if plan.run_dir is None:
                raise RuntimeError("this Locust process has neither a master nor a run "
                                   "directory to claim work from")
            from layergate.harness.rundir import RunDir
            from layergate.harness.store.rows import this_process

            work = StoreWork(RunDir(plan.run_dir), this_process(), plan.lease_s)
        _STATE = _Process(os.getpid(), plan, plan.targets, work,
                          GeventTransport(concurrency=plan.users * len(plan.arms)),
                          replay_tracer())
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
        if item.turns:
            self._converse(item)
            return
        record = item.record
        # due times are on this process's clock (a worker has converted the master's)
        intended_wall = worker_clock() if proc.plan.closed_loop else item.due_at
        delay = intended_wall - worker_clock()
        try:
            if delay > 0:
                gevent.sleep(delay)
        except GreenletExit:  # Locust stops users to rebalance them: keep the record
            proc.work.give_back(item)
            raise
        intended = time.perf_counter() - (worker_clock() - intended_wall)
        # rotate which arm goes out first, so no arm is always first on the wire (an A/A
        # run must not show a systematic RER from send order alone)
        shift = item.seq % len(item.arms)
        arms = item.arms[shift:] + item.arms[:shift]
        jobs = [gevent.spawn(self._send, record, arm, intended) for arm in arms]
        try:
            gevent.joinall(jobs)
        except GreenletExit:  # stopped mid-request: the sends go on; hand their results in
            gevent.spawn(self._complete, item, arms, jobs, intended_wall, True)
            raise
        self._complete(item, arms, jobs, intended_wall)

    def _converse(self, item: WorkItem) -> None:
        """Own mode: every arm goes through the conversation on its own history, each turn
        sent when it is due and the arm's previous turn has finished (closed loop: at once
        after it); the row is done once every arm has stopped."""
        start = worker_clock()
        jobs = [gevent.spawn(self._arm_turns, item, arm, start) for arm in item.arms]
        try:
            gevent.joinall(jobs)
        except GreenletExit:  # stopped mid-conversation: what was written stays; resume goes on
            proc = self.proc
            gevent.spawn(lambda: (gevent.joinall(jobs),
                                  proc.work.complete(item, [], start, lambda: None)))
            raise
        self.proc.work.complete(item, [], start, lambda: None)

    def _arm_turns(self, item: WorkItem, arm: str, start: float) -> None:
        proc, turns = self.proc, item.turns
        state = item.states[arm]
        answers, tools = list(state.answers), dict(state.tools)
        free = start  # when the arm's previous turn finished (this process's clock)
        for i in range(state.start, len(turns)):
            record = turns[i]
            messages = own_messages(turns, i, answers, tools, proc.plan.reasoning_back,
                                    simulate=proc.plan.tool_simulator is not None)
            if isinstance(messages, NeedsTools):
                asked = self._simulate(item, arm, messages)
                if isinstance(asked, str):
                    messages = Ended(messages.turn, asked)
                else:
                    tools[messages.turn] = asked
                    messages = own_messages(turns, i, answers, tools, proc.plan.reasoning_back)
            if isinstance(messages, Ended):
                proc.work.complete_turn(item, TurnDone(turns[messages.turn].id, arm,
                                                       ended=messages.reason))
                return
            due = free if proc.plan.closed_loop else max(
                free, item.due_at + record.offset_s - turns[0].offset_s)
            if due > worker_clock():
                gevent.sleep(due - worker_clock())
            sent = dataclasses.replace(record, body={**record.body, "messages": messages})
            intended = time.perf_counter() - (worker_clock() - due)
            result = self._send(sent, arm, intended)
            free = worker_clock()
            proc.work.complete_turn(item, TurnDone(record.id, arm, result, due))
            self._report(result)
            if not result.ok:  # the conversation is cut here: the error row says so
                return
            answers.append(result)

    def _simulate(self, item: WorkItem, arm: str, needs: NeedsTools) -> tuple[str, ...] | str:
        """The simulator's answers to an arm's own calls (stored with the turn), or why the
        conversation ends (the simulator failed)."""
        simulator = self.proc.plan.tool_simulator
        assert simulator is not None
        rid = item.turns[needs.turn].id
        try:
            answers = tuple(ask_simulator(simulator, call, item.turns[0].id, needs.turn)
                            for call in needs.calls)
        except RuntimeError as exc:
            return str(exc)
        self.proc.work.complete_turn(item, TurnDone(rid, arm, tool_answers=(
            [c.to_wire() for c in needs.calls], list(answers))))
        return answers

    def _complete(self, item: WorkItem, arms: tuple[str, ...], jobs: list[Any],
                  intended_wall: float, wait: bool = False) -> None:
        if wait:
            gevent.joinall(jobs)
        record = item.record
        results = [job.value if job.successful() else ArmResult(
            record.id, arm, record.scenario, ok=False, error=f"replayer: {job.exception!r}")
            for arm, job in zip(arms, jobs, strict=True)]
        self.proc.work.complete(item, results, intended_wall,
                                lambda: [self._report(result) for result in results])

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
