"""The master's side of the replay channel (`channel.py`): the one process that touches the
run's queue and store on behalf of every worker. Locust's master process drives it from the
locustfile; it knows Locust only through the two callables it is given.

A worker says hello with its name, its wall clock and, when the run has a worker token, a
proof that it holds the token (`auth.py`). The master refuses a worker without a valid
proof, a name already held by a connected worker, and a clock further from its own than
`max_skew_s` (the offset is measured at the hello: one-way network time included); a refused
worker is told why and dropped from Locust's workers, so it never counts toward the start
and never gets users, records or a say in the results. Else it welcomes the worker with the
plan (without the run directory) and its own time, from which the worker measures its offset
and corrects every time it sends.

The run starts (`start`, Locust's users spawned) once `plan.expect_workers` accepted workers
are connected; `give_up` records why it never did. Workers that disconnect once the run is
ending (the queue stopped) were stopped, not lost. Work goes out from `WorkQueue.claim`
leased to the worker's name; results come back in batches and are written by
`complete_many`, so a late answer for a record already done elsewhere is dropped and
counted. A worker that Locust reports gone gets its unfinished records put back at once (the
lease timeout in the parent is the backstop). What happened to workers goes to the run's
`workers.json`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from layergate.harness.replay import auth, channel
from layergate.harness.replay.work import WorkerPlan
from layergate.harness.rundir import RunDir
from layergate.harness.store import Completion, ResultStore, TurnDone, WorkItem

MAX_BATCH = 500  # records per `work` message, whatever a worker asks for
# open loop: hand out records due within this many seconds only, so the schedule is shared
# among the workers as it unfolds (and a worker that dies holds little)
LOOKAHEAD_S = 1.0

Send = Callable[[str, dict[str, Any], str], None]  # (message type, data, client id)


@dataclasses.dataclass
class WorkerInfo:
    name: str
    client_id: str
    host: str
    pid: int
    joined: float  # master wall clock
    clock_offset_s: float  # master - worker at the hello (one-way latency included)
    late: bool = False  # joined after work was first handed out
    lost: float | None = None  # when Locust reported it gone mid-run
    stopped: float | None = None  # when it left as the run ended (stopped by the master)
    records: int = 0  # records handed out
    kept: int = 0  # records whose results were written
    dropped: int = 0  # records whose results came too late (done elsewhere)
    released: int = 0  # records put back when it was lost


class WorkMaster:
    def __init__(self, run: RunDir, plan: WorkerPlan, send: Send,
                 connected: Callable[[str], bool], max_skew_s: float,
                 start: Callable[[], None] = lambda: None,
                 disconnect: Callable[[str], None] = lambda client_id: None,
                 token: str | None = None) -> None:
        self.run, self.send, self.connected = run, send, connected
        self.start, self.disconnect, self.token = start, disconnect, token
        self.store: ResultStore = run.open_store()
        self.plan, self.max_skew_s = plan, max_skew_s
        self.worker_plan = dataclasses.replace(plan, run_dir=None)
        self.workers: dict[str, WorkerInfo] = {}  # by name
        self.by_client: dict[str, str] = {}  # Locust client id -> name
        self.refused: list[dict[str, Any]] = []
        self.first_work: float | None = None
        self.started: float | None = None  # when the run's users were spawned
        self.start_failed: str | None = None

    def hello(self, client_id: str, data: dict[str, Any]) -> None:
        now = time.time()
        name = str(data.get("name", ""))
        holder = self.workers.get(name)
        offset = now - float(data.get("wall_time", 0.0))
        reason = auth.refusal(self.token, data) or self._refusal(client_id, name, offset)
        if reason is not None:
            self._refuse(client_id, data, now, reason)
            return
        if holder is not None and holder.client_id != client_id:  # a replacement
            self._lose(holder, now)
        self.workers[name] = WorkerInfo(name, client_id, str(data.get("host", "")),
                                        int(data.get("pid", 0)), now, offset,
                                        late=self.first_work is not None)
        self.by_client[client_id] = name
        self.send(channel.WELCOME, {"plan": dataclasses.asdict(self.worker_plan),
                                    "master_time": time.time(),
                                    "worker_time": data.get("wall_time", 0.0)}, client_id)
        if self.started is None and self.start_failed is None \
                and len(self.accepted()) >= self.plan.expect_workers:
            self.started = time.time()
            self.start()
        self._save()

    def _refusal(self, client_id: str, name: str, offset: float) -> str | None:
        holder = self.workers.get(name)
        if holder is not None and holder.client_id != client_id and holder.lost is None \
                and holder.stopped is None and self.connected(holder.client_id):
            return (f"worker name {name!r} is taken by a connected worker on "
                    f"{holder.host} (pid {holder.pid}): give each worker its own --name")
        if abs(offset) > self.max_skew_s:
            return (f"worker {name!r}: its clock is {offset:+.3f}s off the master's "
                    f"(more than --max-clock-skew {self.max_skew_s}s); sync its clock "
                    "(NTP) or raise the bound")
        return None

    def _refuse(self, client_id: str, data: dict[str, Any], now: float, reason: str) -> None:
        # what the worker said of itself, never its proof
        self.refused.append({"name": str(data.get("name", "")), "host": data.get("host"),
                             "pid": data.get("pid"), "at": now, "reason": reason})
        self.send(channel.REFUSE, {"reason": reason}, client_id)
        self.disconnect(client_id)
        self._save()

    def accepted(self) -> list[WorkerInfo]:
        """The accepted workers still connected."""
        return [w for w in self.workers.values()
                if w.lost is None and w.stopped is None and self.connected(w.client_id)]

    def give_up(self) -> None:
        """Not enough accepted workers joined in time: record who did, who was refused."""
        if self.started is not None or self.start_failed is not None:
            return
        joined = sorted(w.name for w in self.accepted())
        refused = sorted({r["name"] or "?" for r in self.refused})
        self.start_failed = (
            f"{len(joined)} of {self.plan.expect_workers} expected worker(s) joined within "
            f"--worker-wait {self.plan.worker_wait_s:g}s (joined: {', '.join(joined) or 'none'}"
            f"; refused: {', '.join(refused) or 'none'})")
        self._save()

    def want(self, client_id: str, data: dict[str, Any]) -> None:
        worker = self._worker(client_id)
        if worker is None:
            return
        n = max(1, min(int(data.get("n", 1)), MAX_BATCH))
        horizon = None if self.plan.closed_loop else LOOKAHEAD_S
        items: list[WorkItem] = self.store.queue.claim(worker.name, self.plan.lease_s, n,
                                                       horizon_s=horizon)
        if items and self.first_work is None:
            self.first_work = time.time()
        worker.records += len(items)
        self.send(channel.WORK, {"items": [i.to_json() for i in items]}, client_id)

    def results(self, client_id: str, data: dict[str, Any]) -> None:
        worker = self._worker(client_id)
        name = worker.name if worker is not None else self.by_client.get(client_id)
        if name is None:  # never accepted (no token, refused): its results are not taken
            return
        done = [Completion(int(d["seq"]), str(d["request_id"]),
                           tuple(channel.result_from_json(r) for r in d["results"]),
                           d.get("intended_at")) for d in data["done"]]
        kept = self.store.queue.complete_many(done, name)
        seqs = [c.seq for c in done]
        ok = [s for s, k in zip(seqs, kept, strict=True) if k]
        late = [s for s, k in zip(seqs, kept, strict=True) if not k]
        if worker is not None:
            worker.kept += len(ok)
            worker.dropped += len(late)
        self.send(channel.ACK, {"kept": ok, "dropped": late}, client_id)
        if late:
            self._save()

    def turn(self, client_id: str, data: dict[str, Any]) -> None:
        """Own mode: one arm's turn of a conversation, written while the worker holds it."""
        name = self.by_client.get(client_id)
        if self._worker(client_id) is None or name is None:
            return
        t = data["turn"]
        result = channel.result_from_json(t["result"]) if t.get("result") else None
        answers = t.get("tool_answers")
        self.store.queue.complete_turn(int(data["seq"]), name, TurnDone(
            str(t["request_id"]), str(t["arm"]), result, t.get("intended_at"), t.get("ended"),
            (answers[0], answers[1]) if answers else None))

    def check_workers(self) -> None:
        """Put back the unfinished records of every worker Locust no longer sees."""
        now = time.time()
        for worker in self.workers.values():
            if worker.lost is None and worker.stopped is None \
                    and not self.connected(worker.client_id):
                self._lose(worker, now)

    def _lose(self, worker: WorkerInfo, now: float) -> None:
        # once the queue is stopped the run is ending: the master sent its workers away
        if self.store.queue.stopped():
            worker.stopped = now
        else:
            worker.lost = now
        worker.released += self.store.queue.release(worker.name)
        self._save()

    def _worker(self, client_id: str) -> WorkerInfo | None:
        name = self.by_client.get(client_id)
        worker = self.workers.get(name) if name else None
        return worker if worker is not None and worker.client_id == client_id else None

    def summary(self) -> dict[str, Any]:
        return {"workers": [dataclasses.asdict(w) for w in self.workers.values()],
                "refused": self.refused,
                "late_results_dropped": sum(w.dropped for w in self.workers.values()),
                "first_work": self.first_work, "started": self.started,
                "start_failed": self.start_failed}

    def _save(self) -> None:
        self.run.write_workers(self.summary())

    def close(self) -> None:
        """The master is quitting: every worker still here is sent away with it."""
        now = time.time()
        for worker in self.workers.values():
            if worker.lost is None and worker.stopped is None:
                worker.stopped = now
        self._save()
        self.store.close()
