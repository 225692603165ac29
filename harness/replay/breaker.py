"""The replay's circuit breaker: an arm whose last `limit` requests all failed to connect
(refused, reset, broken mid-stream) is down, and sending to it wastes the rest of the
trace. The run then stops `interrupted`, naming the arm, so `--resume` finishes it once the
arm is back. Timeouts and HTTP errors do not count: a slow or failing arm is a result the
gate judges, not a missing one."""

from __future__ import annotations

from layergate.exporters.records import ArmResult
from layergate.harness.replay.client import is_connection_failure
from layergate.harness.store.results import Head

DEFAULT_LIMIT = 10


class CircuitBreaker:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self.streak: dict[str, int] = {}  # arm -> connection failures in a row
        self.tripped: str | None = None  # why, once it has

    def observe(self, result: ArmResult | Head) -> None:
        if self.limit <= 0 or self.tripped is not None:
            return
        arm = result.arm
        self.streak[arm] = self.streak.get(arm, 0) + 1 if is_connection_failure(result) else 0
        if self.streak[arm] >= self.limit:
            self.tripped = (f"circuit breaker: the {arm} arm's last {self.limit} requests all "
                            f"failed to connect ({result.error}); finish the run with --resume "
                            "once it is back")
