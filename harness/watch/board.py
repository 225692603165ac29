"""The watch's current state, shared between the decision loop and whoever asks: the HTTP
answers for Flagger and Argo Rollouts, and the Prometheus collector.

JSON (`GET /status`, optionally `?stage=S`): `verdict` (pending / pass / fail /
inconclusive / no_data), `state` (watching / no_data while pending), `stage`,
`stage_verdict` (the verdict for stage S: `pass` once the watch moved past it), `exit_code`,
`windows`, `reasons`, `no_data_reason`, and every figure with its estimate, interval,
threshold and decision.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from layergate.exporters.catalogue import (
    CANDIDATE,
    FAIL,
    INCONCLUSIVE,
    NO_DATA,
    PASS,
    PENDING,
    ROLLBACK,
)
from layergate.exporters.figures.canary import Window
from layergate.harness.watch.flagger import Payload, WebhookReply, WeightReading, answer
from layergate.harness.watch.journal import Journal, window_entry, window_of
from layergate.harness.watch.stages import StageFigure, StageMachine, Transition, WatchStatus

DECISIONS = {PASS: 1, FAIL: -1}  # a figure's check status -> good / bad (else 0)


@dataclass(frozen=True)
class Snapshot:
    status: WatchStatus
    transitions: tuple[Transition, ...]
    alpha: float


@dataclass(frozen=True)
class Missing:
    """A window without data: why, and whether it was the candidate's that was missing."""

    end: float
    reason: str
    candidate: bool = False


class Board:
    """The stage machine, its journal and what controllers are told, under one lock: the
    decision loop feeds windows (`observe`), the HTTP threads ask (`flagger`, `to_json`),
    and a new revision from Flagger starts the stages over."""

    def __init__(self, new_machine: Callable[[], StageMachine], journal: Journal | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self._new_machine = new_machine
        self.journal = journal or Journal.open(None, {}, 0.0)  # kept in memory only
        self.say = say or (lambda _msg: None)
        self._lock = threading.RLock()
        self._reading: WeightReading | None = None
        self._restore()

    def _restore(self) -> None:
        """Replay this revision's recorded windows: the same sequences, stage and verdict."""
        self.machine = self._new_machine()
        self.plan, self.alpha = self.machine.plan, self.machine.alpha
        self.inconclusive = self.machine.policy.inconclusive
        self._status = self.machine.status
        self._transitions: list[Transition] = []
        for entry in self.journal.inputs:
            self._step(entry)
            if "weight" in entry:
                self._reading = WeightReading(**entry["weight"])
        if self.journal.data.get("reading") is not None:  # read after the verdict
            self._reading = WeightReading(**self.journal.data["reading"])

    def _step(self, entry: dict[str, Any]) -> tuple[WatchStatus, Transition | None]:
        if NO_DATA in entry:
            status, t = self.machine.step(None, entry[NO_DATA], entry.get(CANDIDATE, False))
        else:
            status, t = self.machine.step(window_of(entry), served_at=entry.get("served_at"))
        self._status = status
        if t is not None:
            self._transitions.append(t)
        return status, t

    def observe(self, got: Window | Missing, reading: WeightReading | None = None,
                epoch: int | None = None) -> tuple[WatchStatus, Transition | None]:
        """One window: step, record it and save the journal before anyone acts on it. A
        window read for an earlier revision (`epoch`) is dropped."""
        with self._lock:
            if epoch is not None and epoch != self.epoch:
                return self._status, None
            entry = window_entry(got) if isinstance(got, Window) else {
                "end": got.end, NO_DATA: got.reason, CANDIDATE: got.candidate}
            if reading is not None and isinstance(got, Missing) \
                    and reading.source == "observed" and self.machine.served:
                reading = None  # a scrape gap is no share of 0 once the candidate served
            if reading is not None:
                entry["weight"] = asdict(reading)
                if isinstance(got, Window):
                    entry["served_at"] = self._served_at(got, reading)
                self._reading = reading
            self.journal.record_input(entry)
            out = self._step(entry)
            self.journal.note(stage=out[0].stage, verdict=out[0].verdict)
            self.journal.save()
            return out

    def _served_at(self, window: Window, reading: WeightReading) -> float:
        """The stage the window was served at (its lowest weight). A share observed over a
        window that began before the last grant mixes two weights: it counts at no
        stage above the one granted from."""
        at = self.plan.nearest(reading.served)
        last = self.journal.last_grant()
        if reading.source == "observed" and last is not None and window.start < last["at"]:
            at = min(at, self.plan.nearest(last["weight"]))
        return at

    def read_weight(self, reading: WeightReading, epoch: int | None = None) -> None:
        """A weight reading with no window to judge (the verdict is in): Flagger still asks
        confirm-traffic-increase at the last step, and each grant needs a newer reading."""
        with self._lock:
            if epoch is not None and epoch != self.epoch:
                return
            self._reading = reading
            self.journal.note(reading=asdict(reading))
            self.journal.save()

    def _adopt(self, revision: str, who: str) -> None:
        """A controller names the revision it rolls out: a new one (or the first one named
        after a verdict) starts the stages over. Under the lock."""
        if not revision or revision == self.journal.revision:
            return
        fresh = self.journal.revision is None and self._status.verdict == PENDING
        if self.journal.new_revision(revision, reset=not fresh):
            self.say(f"new revision {revision} ({who}): the stages start over")
            self._reading = None
            self._restore()

    @property
    def epoch(self) -> int:
        return self.journal.epoch

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._status, tuple(self._transitions), self.alpha)

    def stage_verdict(self, stage: float | None) -> str:
        """What Argo is told of stage S: `pass` once passed; `fail` from the rolled-back
        stage on (an inconclusive one too under `inconclusive: rollback`)."""
        s = self.snapshot().status
        if stage is None or s.verdict == NO_DATA:
            return s.verdict
        if stage in s.history:
            return PASS
        if s.verdict == FAIL or (s.verdict == INCONCLUSIVE
                                   and self.inconclusive == ROLLBACK):
            return FAIL if stage >= s.stage else PASS
        return s.verdict if stage == s.stage else PENDING

    def argo(self, stage: float | None, revision: str = "") -> dict[str, Any]:
        """`/status` (Argo Rollouts' web metric reads `stage_verdict`); recorded. A
        `revision` (the AnalysisTemplate's pod-template hash) other than the watch's starts
        the stages over first, so a new revision is never answered from an earlier one."""
        with self._lock:
            self._adopt(revision, f"argo, stage {stage}")
            body = self.to_json(stage)
            if stage is not None:
                self.journal.answer(controller="argo", stage=stage, revision=revision,
                                    stage_verdict=body["stage_verdict"])
                self.journal.save()
        return body

    def flagger(self, hook: str, payload: Payload, now: float | None = None) -> WebhookReply:
        """Flagger webhook `hook` (KeyError for an unknown one). A payload naming a new
        revision starts the stages over first. Recorded, and saved before it is sent."""
        now = time.time() if now is None else now
        with self._lock:
            self._adopt(payload.checksum, f"flagger, {payload.describe()}")
            last = self.journal.last_grant()
            got = answer(hook, self._status, self.plan, self._reading,
                         None if last is None else last["at"], self.inconclusive)
            if got.grant:
                self.journal.grant(self._reading.weight if self._reading else 0.0, now,
                                   self._status.history)
            self.journal.answer(controller="flagger", hook=hook, code=got.code,
                                message=got.message, name=payload.name,
                                namespace=payload.namespace, phase=payload.phase,
                                checksum=payload.checksum)
            self.journal.save()
        self.say(f"flagger {hook} ({payload.describe()}): {got.code} {got.message}")
        return got

    def to_json(self, stage: float | None = None) -> dict[str, Any]:
        snap = self.snapshot()
        s = snap.status
        return {
            "verdict": s.verdict, "state": s.state, "stage": s.stage,
            "stage_verdict": self.stage_verdict(stage),
            "revision": self.journal.revision, "waiting_windows": s.waiting,
            "held_windows": s.held, "held_at": s.held_at,
            "stages": list(self.plan.analysed), "stages_passed": list(s.history),
            "exit_code": s.exit_code, "windows": s.windows, "missing_windows": s.missing,
            "no_data_reason": s.no_data_reason, "reasons": list(s.reasons),
            "window_end": s.window_end, "figure_alpha": snap.alpha,
            "figures": {f.check.name: _figure(f) for f in s.figures},
            "transitions": [{"decision": t.decision, "stage": t.stage,
                             "next_stage": t.next_stage, "reasons": list(t.reasons)}
                            for t in snap.transitions],
        }


def _figure(f: StageFigure) -> dict[str, Any]:
    c = f.check
    return {"value": c.value, "low": c.ci_low, "high": c.ci_high, "last_window": f.last,
            "per_window": list(f.history),
            "threshold": c.threshold, "direction": c.direction, "critical": c.critical,
            "windows": c.n, "status": c.status, "decision": DECISIONS.get(c.status, 0),
            "reason": c.reason}
