"""The worker's side of the replay channel (`channel.py`): a `WorkSource` fed by the master
over Locust's messages. Runs only inside a Locust worker process (gevent).

The worker keeps a small buffer of records (it asks for as many as it has users waiting,
one request at a time; closed loop, one per user ahead), converts each record's due time
from the master's clock to its own, and sends results back in batches (every FLUSH_S, or
at once when BATCH are waiting). A result reaches Locust's stats only when the master acks
that it was written.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import gevent
from gevent.event import Event

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.records import ArmResult
from layergate.harness.replay import auth, channel
from layergate.harness.replay.work import WorkerPlan
from layergate.harness.store import TurnDone, WorkItem

FLUSH_S = 0.1
STATS_S = 0.3  # the longest kept results wait before Locust's stats go to the master
CLAIM_WAIT_S = 0.5  # how long a user waits for records on their way before looking again
QUIT_GRACE_S = 10.0
BATCH = 100
# a fault-injection knob for tests: shift this worker's clock readings by S seconds
SKEW_ENV = "LAYERGATE_WORKER_CLOCK_SKEW_S"

log = logging.getLogger(__name__)


_SKEW_S = float(os.environ.get(SKEW_ENV, "0") or 0)  # read once: the clock is read per request


def worker_clock() -> float:
    return time.time() + _SKEW_S


class ChannelWork:
    def __init__(self, runner: Any, name: str) -> None:
        self.runner, self.name = runner, name
        self.plan: WorkerPlan | None = None
        self.offset = 0.0  # master clock - this worker's clock
        self.ready = Event()
        self.buffer: collections.deque[WorkItem] = collections.deque()
        self.asked = False  # a `want` is on its way
        self.idle = 0  # users waiting for a record
        self.dry = False  # the master's last answer held no record
        self.stats_due = False  # a stats report to the master is scheduled
        # one event per user waiting for a record: a `work` answer wakes as many as it
        # brought records (all of them when it brought none), not every idle user, which
        # at hundreds of users (--max-in-flight) cost more than the records' own sending
        self.waiting_users: collections.deque[Event] = collections.deque()
        self.outbox: list[dict[str, Any]] = []
        self.waiting: dict[int, Callable[[], None]] = {}  # seq -> report once kept
        self.sent_hello = 0.0
        for kind, handler in ((channel.WELCOME, self._welcome), (channel.REFUSE, self._refuse),
                              (channel.WORK, self._work), (channel.ACK, self._ack)):
            runner.register_message(kind, handler)

    def hello(self) -> None:
        self.sent_hello = worker_clock()
        self.runner.send_message(channel.HELLO, auth.signed_hello({
            "name": self.name, "host": os.uname().nodename, "pid": os.getpid(),
            "wall_time": self.sent_hello}))
        gevent.spawn(self._flusher)

    def wait_ready(self) -> WorkerPlan:
        self.ready.wait()
        assert self.plan is not None
        return self.plan

    # WorkSource
    def claim(self) -> WorkItem | None:
        deadline = time.monotonic() + CLAIM_WAIT_S
        while not self.buffer:
            self.idle += 1
            woken = Event()
            self.waiting_users.append(woken)
            try:
                self._ask()
                woken.wait(max(0.0, deadline - time.monotonic()))
            finally:
                self.idle -= 1
                if not woken.is_set():  # timed out (or stopped): no longer waiting
                    self.waiting_users.remove(woken)
            if not self.buffer and (self.dry or time.monotonic() >= deadline):
                return None  # the master has nothing for now
        item = self.buffer.popleft()
        if self._prefetch() and len(self.buffer) < self._prefetch() // 2:
            self._ask()  # closed loop: the next round trip overlaps the sends
        return item

    def give_back(self, item: WorkItem) -> None:
        # still leased to this worker: the next of its users takes it, due as before
        self.buffer.appendleft(item)
        self._wake(1)

    def complete(self, item: WorkItem, results: Sequence[ArmResult], intended_at: float,
                 kept: Callable[[], None]) -> None:
        self.waiting[item.seq] = kept
        self.outbox.append({"seq": item.seq, "request_id": item.record.id,
                            "intended_at": intended_at + self.offset,
                            "results": [channel.result_to_json(r) for r in results]})
        if len(self.outbox) >= BATCH:
            self._flush()

    def complete_turn(self, item: WorkItem, turn: TurnDone) -> None:
        # at once: a conversation's turns are what a resume goes on from
        data = turn.to_json()
        data["intended_at"] = None if turn.intended_at is None else turn.intended_at + self.offset
        data["result"] = channel.result_to_json(turn.result) if turn.result else None
        self.runner.send_message(channel.TURN, {"seq": item.seq, "turn": data})

    # the channel
    def _prefetch(self) -> int:
        """Records to keep at hand: closed loop, one per user (each sends at once when
        free); open loop none beyond the waiting users, since users take records up to
        the master's look-ahead early and the round trip is off the critical path."""
        if self.plan is None or not self.plan.closed_loop:
            return 0
        return max(1, getattr(self.runner, "user_count", 1) or 1)

    def _ask(self) -> None:
        if self.asked or self.plan is None:
            return
        self.asked = True
        # as many as there are users waiting (plus the closed loop's prefetch): the rest of
        # the schedule stays with the master, for whichever worker has a user free first
        n = max(1, self.idle, self._prefetch() - len(self.buffer))
        self.runner.send_message(channel.WANT, {"n": n})

    def _flush(self) -> None:
        if self.outbox:
            batch, self.outbox = self.outbox, []
            self.runner.send_message(channel.RESULTS, {"done": batch})

    def _flusher(self) -> None:
        while True:
            gevent.sleep(FLUSH_S)
            self._flush()

    def _welcome(self, environment: Any, msg: Any) -> None:
        data = msg.data
        self.offset = channel.clock_offset(data["worker_time"], data["master_time"],
                                           worker_clock())
        self.plan = WorkerPlan(**data["plan"])
        log.info("joined as %s; clock offset to the master %+.4fs", self.name, self.offset)
        self.ready.set()

    def _refuse(self, environment: Any, msg: Any) -> None:
        print(f"error: the master refused this worker: {msg.data['reason']}", file=sys.stderr,
              flush=True)
        environment.process_exit_code = ExitCode.USAGE  # replay-worker's: refused
        # not from this handler's own greenlet (quit kills it); and a refused worker holds
        # nothing, so if Locust does not wind down in time, leave anyway
        gevent.spawn(environment.runner.quit)
        gevent.spawn_later(QUIT_GRACE_S, os._exit, ExitCode.USAGE)

    def _work(self, environment: Any, msg: Any) -> None:
        for obj in msg.data["items"]:
            item = WorkItem.from_json(obj)
            # the master's clock to this worker's
            self.buffer.append(dataclasses.replace(item, due_at=item.due_at - self.offset))
        self.asked = False
        self.dry = not msg.data["items"]
        self._wake(len(msg.data["items"]) or len(self.waiting_users))

    def _wake(self, n: int) -> None:
        """Wake `n` of the users waiting for a record, the longest waiting first."""
        for _ in range(min(n, len(self.waiting_users))):
            self.waiting_users.popleft().set()

    def _ack(self, environment: Any, msg: Any) -> None:
        for seq in msg.data["kept"]:
            report = self.waiting.pop(seq, None)
            if report is not None:
                report()
        for seq in msg.data["dropped"]:
            self.waiting.pop(seq, None)
        if msg.data["kept"] and not self.stats_due:
            self.stats_due = True
            gevent.spawn_later(STATS_S, self._send_stats)

    def _send_stats(self) -> None:
        """Report Locust's stats to the master now, not at its next 3 s tick: the master's
        web UI and CSV then hold the last results too when the run ends right after them."""
        self.stats_due = False
        send = getattr(self.runner, "_send_stats", None)  # Locust's own report, if it has it
        if send is not None:
            send()
