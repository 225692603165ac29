"""Before a step: are the arms idle? A step that starts while a server still works off the
last step's queue (requests the replayer gave up on are not always dropped by the server)
measures the two steps at once, and the ladder's steps run in increasing load, so that
carry-over would always bias the same way.

The check is a probe: one request of the sweep's own traffic cut to one output token, sent
to every arm at once. Its time, against the arm's idle time (the fastest of the probes sent
before the first step, when nothing was queued), says whether it waited: an arm is idle
when a probe comes back within `IDLE_FACTOR` times its idle time plus `IDLE_SLACK_S`. A
busy arm is probed again every `POLL_S` until it is idle or the timeout passes (the step
then runs, and the wait and the arm are noted in the sweep)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from layergate.exporters.traffic import TrafficRecord
from layergate.harness.openai_stream import BodyShape, streaming_body

IDLE_FACTOR = 2.0
IDLE_SLACK_S = 0.05
POLL_S = 0.25
REFERENCE_PROBES = 3


@dataclasses.dataclass(frozen=True)
class IdleWait:
    """One idle check: seconds waited, and the arms still busy when it gave up."""

    seconds: float
    busy: tuple[str, ...] = ()

    def text(self) -> str:
        if self.busy:
            return (f"{', '.join(self.busy)} still answered a probe slowly after "
                    f"{self.seconds:.1f}s: the step ran anyway")
        return f"idle after {self.seconds:.1f}s"


class IdleCheck:
    """Probes for the arms `urls` (arm -> base URL), with `models` put in the body."""

    def __init__(self, urls: dict[str, str], models: dict[str, str], record: TrafficRecord,
                 timeout_s: float, send: Callable[[str, dict], float] | None = None,
                 idle_s: dict[str, float] | None = None) -> None:
        self.urls = urls
        self.models = models
        self.record = record
        self.timeout_s = timeout_s
        self.send = send or _timed_post
        # learnt idle times (`learn`), updated in place: the sweep's state keeps them
        self.idle_s = {} if idle_s is None else idle_s

    def _probe(self, arms: tuple[str, ...]) -> dict[str, float]:
        """Each arm's probe time in seconds (inf: it failed), sent at once."""
        body = {arm: self._body(arm) for arm in arms}
        url = {arm: self.urls[arm].rstrip("/") + self.record.endpoint for arm in arms}
        with ThreadPoolExecutor(max_workers=max(1, len(arms))) as pool:
            times = pool.map(lambda a: self.send(url[a], body[a]), arms)
            return dict(zip(arms, times, strict=True))

    def _body(self, arm: str) -> dict:
        body = streaming_body(self.record, BodyShape(model=self.models.get(arm), extras=False))
        body.pop("max_completion_tokens", None)
        return body | {"max_tokens": 1}

    def learn(self, arms: tuple[str, ...]) -> None:
        """Each arm's idle probe time: the fastest of a few probes, before any step."""
        for _ in range(REFERENCE_PROBES):
            for arm, took in self._probe(arms).items():
                self.idle_s[arm] = min(self.idle_s.get(arm, took), took)

    def wait(self, arms: tuple[str, ...], clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> IdleWait:
        """Probe `arms` until each answers as fast as when idle, or the timeout passes."""
        began = clock()
        pending = tuple(a for a in arms if a in self.idle_s)
        while pending:
            took = self._probe(pending)
            pending = tuple(a for a in pending
                            if took[a] > IDLE_FACTOR * self.idle_s[a] + IDLE_SLACK_S)
            if not pending or clock() - began >= self.timeout_s:
                break
            sleep(POLL_S)
        return IdleWait(round(clock() - began, 3), pending)


def _timed_post(url: str, body: dict) -> float:
    """Seconds for the whole (streamed) answer; inf when the request fails."""
    began = time.monotonic()
    try:
        with httpx.stream("POST", url, json=body, timeout=30.0) as response:
            for _ in response.iter_bytes():
                pass
            if response.status_code >= 400:
                return float("inf")
    except httpx.HTTPError:
        return float("inf")
    return time.monotonic() - began
