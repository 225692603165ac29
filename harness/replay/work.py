"""What a Locust process needs to replay, and nothing more: its plan and a `WorkSource` to
claim records from and hand results to.

The parent hands the plan to Locust's master in an environment variable. The master owns
the run directory and serves the work over Locust's messages (`master.py`); each worker
gets the plan without `run_dir` at its welcome and claims through `ChannelWork`
(`channel_work.py`), owning nothing on disk. A Locust process run alone (no master) claims
straight from the run's store (`StoreWork`). The user loop is the same for both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Protocol

from layergate.exporters.records import ArmResult
from layergate.harness.replay.client import Target
from layergate.harness.store.items import TurnDone, WorkItem

if TYPE_CHECKING:  # `StoreWork` only: a worker fed by the master opens no store
    from layergate.harness.rundir import RunDir
    from layergate.harness.store.results import ResultStore

PLAN_ENV = "LAYERGATE_REPLAY_PLAN"
# a lease runs this long past the request's own deadline (due + timeout): time to write the
# results even when the store is busy, before the record counts as lost and is sent again
LEASE_MARGIN_S = 60.0


@dataclass(frozen=True)
class WorkerPlan:
    arms: dict[str, str]  # arm -> base URL
    models: dict[str, str]  # arm -> `model` to put in the body
    timeout: float
    closed_loop: bool
    users: int  # Locust users of the whole run
    run_dir: str | None = None  # where StoreWork finds the queue; None on a bare worker
    top_logprobs: int = 0  # logprobs to ask every arm for (0: as the traffic asks)
    tokenizers: dict[str, str] = field(default_factory=dict)  # arm -> tokenizer.json path
    max_clock_skew_s: float = 30.0  # the master refuses a worker whose clock is further off
    expect_workers: int = 1  # accepted workers the master waits for before the start
    worker_wait_s: float = 0.0  # how long it waits for them (0: for ever)
    # own conversation mode (harness/replay/own.py): the simulator of tools whose calls
    # differ from the recorded ones (None: such a conversation ends), and how an arm's
    # reasoning goes back in its history
    tool_simulator: str | None = None
    reasoning_back: str = "omit"

    @property
    def targets(self) -> dict[str, Target]:
        return {arm: Target(arm, url, self.models.get(arm), self.top_logprobs,
                            self.tokenizers.get(arm)) for arm, url in self.arms.items()}

    @property
    def lease_s(self) -> float:
        return self.timeout + LEASE_MARGIN_S

    def to_env(self) -> dict[str, str]:
        return {PLAN_ENV: json.dumps(asdict(self))}

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> WorkerPlan:
        return cls(**json.loads(environ[PLAN_ENV]))


class WorkSource(Protocol):
    def claim(self) -> WorkItem | None:
        """The next record to send, or None when there is nothing to do right now."""

    def complete(self, item: WorkItem, results: Sequence[ArmResult], intended_at: float,
                 kept: Callable[[], None]) -> None:
        """Hand over the item's results; `kept` is called once they are written (never
        when they are dropped: the record was already done by another claim)."""

    def give_back(self, item: WorkItem) -> None:
        """An item claimed but not sent (Locust stopped its user): another may send it."""

    def complete_turn(self, item: WorkItem, turn: TurnDone) -> None:
        """Own mode: one arm's turn of the conversation `item`, written as it comes."""


class StoreWork:
    """Work from the run directory's own queue, one connection per process."""

    def __init__(self, run: RunDir, owner: str, lease_s: float) -> None:
        self.store: ResultStore = run.open_store()
        self.owner, self.lease_s = owner, lease_s

    def claim(self) -> WorkItem | None:
        items = self.store.queue.claim(self.owner, self.lease_s)
        return items[0] if items else None

    def complete(self, item: WorkItem, results: Sequence[ArmResult], intended_at: float,
                 kept: Callable[[], None]) -> None:
        if self.store.queue.complete(item, results, self.owner, intended_at):
            kept()

    def give_back(self, item: WorkItem) -> None:
        self.store.queue.release(self.owner, item.seq)

    def complete_turn(self, item: WorkItem, turn: TurnDone) -> None:
        self.store.queue.complete_turn(item.seq, self.owner, turn)
