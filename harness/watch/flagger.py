"""What the watch answers each Flagger webhook, from its state alone.

Flagger (fluxcd/flagger `pkg/controller/scheduler.go`, `scheduler_hooks.go`, `webhook.go`)
POSTs a JSON payload (`name`, `namespace`, `phase`, `checksum`, `metadata`) to each webhook
and reads any status above 202 as "no". On each analysis tick it calls, in this order:
`rollback` (a 2xx rolls back at once), then `rollout` (a "no" adds one failed check; the
failed checks add up over the whole analysis and roll back at `threshold`; not called while
the canary weight is still 0), then `confirm-traffic-increase` (whenever a next step weight
exists, which includes the last step weight: a "no" holds the weight), and at the last step
weight `confirm-promotion` (a "no" waits). So:

- `rollout`: 200 unless the watch wants a rollback (fail, terminal no_data, an inconclusive
  stage under `inconclusive: rollback`). A short data gap or a restarting watch is no
  failed check;
- `confirm-traffic-increase`: 200 when the watch has decided the stage at or beyond the
  weight Flagger is at (or Flagger is still at 0 %); the weight comes from a reading (one
  per window) newer than the last grant, so a lost answer or a failed route change is
  granted again, a step is never granted twice from a stale reading, and there is no free
  step before the first reading;
- `confirm-promotion`: 200 once every stage passed;
- `rollback`: 200 when the watch wants a rollback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from layergate.exporters.catalogue import (
    FAIL,
    INCONCLUSIVE,
    NO_DATA,
    PASS,
    PENDING,
    ROLLBACK,
    UNDECIDED,
)
from layergate.harness.watch.stages import StagePlan, WatchStatus

HOOKS = ("rollout", "confirm-traffic-increase", "confirm-promotion", "rollback")
GO, HALT = 200, 403  # 403 is what Flagger's own load tester answers for a closed gate


@dataclass(frozen=True)
class Payload:
    """The part of Flagger's CanaryWebhookPayload the watch reads."""

    name: str = ""
    namespace: str = ""
    phase: str = ""
    checksum: str = ""

    @classmethod
    def parse(cls, body: bytes) -> Payload:
        """An empty body is an empty payload; anything else must be a JSON object."""
        if not body.strip():
            return cls()
        try:
            raw = json.loads(body)
        except ValueError as exc:
            raise ValueError(f"the webhook payload is not JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise ValueError("the webhook payload must be a JSON object")
        return cls(*(str(raw.get(k) or "") for k in ("name", "namespace", "phase",
                                                     "checksum")))

    def describe(self) -> str:
        who = ".".join(x for x in (self.name, self.namespace) if x) or "?"
        return f"{who} phase {self.phase or '?'} checksum {self.checksum or '?'}"


@dataclass(frozen=True)
class WeightReading:
    """The canary weight the controller had set, in percent, as of a time."""

    weight: float
    as_of: float
    source: str  # "controller" (its exported weight) or "observed" (the traffic share)
    low: float | None = None  # the lowest weight over the window (the controller's)

    @property
    def served(self) -> float:
        """The weight the whole window was served at or above."""
        return self.weight if self.low is None else min(self.low, self.weight)


@dataclass(frozen=True)
class WebhookReply:
    code: int
    message: str
    grant: bool = False  # a confirm-traffic-increase let through


def wants_rollback(status: WatchStatus, inconclusive: str) -> bool:
    return status.verdict in (FAIL, NO_DATA) or (
        status.verdict == INCONCLUSIVE and inconclusive == ROLLBACK)


def answer(hook: str, status: WatchStatus, plan: StagePlan, reading: WeightReading | None,
           last_grant_at: float | None, inconclusive: str) -> WebhookReply:
    """The answer to Flagger webhook `hook` (one of HOOKS; KeyError otherwise)."""
    rollback = wants_rollback(status, inconclusive)
    if hook == "rollout":
        return WebhookReply(HALT, _why(status)) if rollback else \
            WebhookReply(GO, f"{status.state} at stage {status.stage:g} %")
    if hook == "rollback":
        return WebhookReply(GO, _why(status)) if rollback else \
            WebhookReply(HALT, f"no rollback ({status.state})")
    if hook == "confirm-promotion":
        return WebhookReply(GO, "every stage passed") if status.verdict == PASS else \
            WebhookReply(HALT, _why(status) if status.verdict != PENDING
                         else f"stage {status.stage:g} % not decided yet")
    if hook != "confirm-traffic-increase":
        raise KeyError(hook)
    if status.verdict not in (PENDING, PASS):
        return WebhookReply(HALT, _why(status))
    if reading is None:  # never a free step: a restarted watch would hand out one more
        return WebhookReply(HALT, "no reading of the canary weight yet (one comes with each "
                            "window)")
    if last_grant_at is not None and reading.as_of <= last_grant_at:
        return WebhookReply(HALT, "waiting for a reading of the canary weight taken after the "
                            "last step was granted")
    at = plan.nearest(reading.weight)
    decided = max(status.history, default=0.0)
    if at <= decided:
        what = "no traffic on the canary yet" if at == 0 else f"stage {at:g} % passed"
        return WebhookReply(GO, f"weight {reading.weight:g} % ({reading.source}): {what}",
                            grant=True)
    return WebhookReply(HALT, f"weight {reading.weight:g} % ({reading.source}): stage {at:g} % "
                        f"not decided yet ({status.state})")


def _why(s: WatchStatus) -> str:
    detail = s.no_data_reason if s.state == NO_DATA else "; ".join(s.reasons)
    return f"{s.state} at stage {s.stage:g} %: {detail or UNDECIDED}"
