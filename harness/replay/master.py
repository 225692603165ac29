"""The master's side of the replay channel (`channel.py`): the one process that touches the
run's queue and store on behalf of every worker. Locust's master process drives it from
the locustfile; it knows Locust only through the two callables it is given.

A worker says hello with its name and wall clock. The master refuses a name already held
by a connected worker, and a clock further from its own than `max_skew_s` (the offset is
measured at the hello: one-way network time included); else it welcomes the worker with
the plan (without the run directory) and its own time, from which the worker measures its
offset and corrects every time it sends. Work goes out from `WorkQueue.claim` leased to
the worker's name; results come back in batches and are written by `complete_many`, so a
late answer for a record already done elsewhere is dropped and counted. A worker that
Locust reports gone gets its unfinished records put back at once (the lease timeout in the
parent is the backstop). What happened to workers goes to the run's `workers.json`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from harness.replay import channel
from harness.replay.work import WorkerPlan
from harness.rundir import RunDir
from harness.store import Completion, ResultStore, WorkItem

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
    lost: float | None = None  # when Locust reported it gone
    records: int = 0  # records handed out
    kept: int = 0  # records whose results were written
    dropped: int = 0  # records whose results came too late (done elsewhere)
    released: int = 0  # records put back when it was lost


class WorkMaster:
    def __init__(self, run: RunDir, plan: WorkerPlan, send: Send,
                 connected: Callable[[str], bool], max_skew_s: float) -> None:
        self.run, self.send, self.connected = run, send, connected
        self.store: ResultStore = run.open_store()
        self.plan, self.max_skew_s = plan, max_skew_s
        self.worker_plan = dataclasses.replace(plan, run_dir=None)
        self.workers: dict[str, WorkerInfo] = {}  # by name
        self.by_client: dict[str, str] = {}  # Locust client id -> name
        self.refused: list[dict[str, Any]] = []
        self.first_work: float | None = None

    def hello(self, client_id: str, data: dict[str, Any]) -> None:
        now = time.time()
        name = str(data["name"])
        offset = now - float(data["wall_time"])
        holder = self.workers.get(name)
        reason = None
        if holder is not None and holder.client_id != client_id and holder.lost is None \
                and self.connected(holder.client_id):
            reason = (f"worker name {name!r} is taken by a connected worker on "
                      f"{holder.host} (pid {holder.pid}): give each worker its own --name")
        elif abs(offset) > self.max_skew_s:
            reason = (f"worker {name!r}: its clock is {offset:+.3f}s off the master's "
                      f"(more than --max-clock-skew {self.max_skew_s}s); sync its clock "
                      "(NTP) or raise the bound")
        if reason is not None:
            self.refused.append({"name": name, "host": data.get("host"), "at": now,
                                 "reason": reason})
            self.send(channel.REFUSE, {"reason": reason}, client_id)
            self._save()
            return
        if holder is not None and holder.client_id != client_id:  # a replacement
            self._lose(holder, now)
        self.workers[name] = WorkerInfo(name, client_id, str(data.get("host", "")),
                                        int(data.get("pid", 0)), now, offset,
                                        late=self.first_work is not None)
        self.by_client[client_id] = name
        self.send(channel.WELCOME, {"plan": dataclasses.asdict(self.worker_plan),
                                    "master_time": time.time(),
                                    "worker_time": data["wall_time"]}, client_id)
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
        name = worker.name if worker is not None else self.by_client.get(client_id, client_id)
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

    def check_workers(self) -> None:
        """Put back the unfinished records of every worker Locust no longer sees."""
        now = time.time()
        for worker in self.workers.values():
            if worker.lost is None and not self.connected(worker.client_id):
                self._lose(worker, now)

    def _lose(self, worker: WorkerInfo, now: float) -> None:
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
                "first_work": self.first_work}

    def _save(self) -> None:
        self.run.write_workers(self.summary())

    def close(self) -> None:
        self._save()
        self.store.close()
