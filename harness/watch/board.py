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
from dataclasses import dataclass
from typing import Any

from harness.watch.stages import FigureState, StagePlan, Transition, WatchStatus

DECISIONS = {"pass": 1, "fail": -1}  # a figure's check status -> good / bad (else 0)


@dataclass(frozen=True)
class Snapshot:
    status: WatchStatus
    transitions: tuple[Transition, ...]
    alpha: float


class Board:
    def __init__(self, plan: StagePlan, first: WatchStatus, alpha: float) -> None:
        self.plan = plan
        self._lock = threading.Lock()
        self._status = first
        self._transitions: list[Transition] = []
        self._granted = 0  # Flagger traffic increases let through so far
        self.alpha = alpha

    def update(self, status: WatchStatus, transition: Transition | None) -> None:
        with self._lock:
            self._status = status
            if transition is not None:
                self._transitions.append(transition)

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(self._status, tuple(self._transitions), self.alpha)

    def stage_verdict(self, stage: float | None) -> str:
        s = self.snapshot().status
        if stage is None or s.verdict == "no_data":
            return s.verdict
        if stage in s.history:
            return "pass"
        if s.verdict == "fail":
            return "fail" if stage >= s.stage else "pass"
        return s.verdict if stage == s.stage else "pending"

    def grant_traffic_increase(self) -> bool:
        """Flagger's confirm-traffic-increase: the first step onto the first stage is free;
        each further one waits for an advance, and each advance lets exactly one through."""
        with self._lock:
            allowed = 1 + len([t for t in self._transitions if t.decision == "advance"
                               and not t.final])
            if self._status.verdict in ("fail", "inconclusive", "no_data"):
                return False
            if self._granted < allowed:
                self._granted += 1
                return True
            return False

    def to_json(self, stage: float | None = None) -> dict[str, Any]:
        snap = self.snapshot()
        s = snap.status
        return {
            "verdict": s.verdict, "state": s.state, "stage": s.stage,
            "stage_verdict": self.stage_verdict(stage),
            "stages": list(self.plan.analysed), "stages_passed": list(s.history),
            "exit_code": s.exit_code, "windows": s.windows, "missing_windows": s.missing,
            "no_data_reason": s.no_data_reason, "reasons": list(s.reasons),
            "window_end": s.window_end, "figure_alpha": snap.alpha,
            "figures": {f.check.name: _figure(f) for f in s.figures},
            "transitions": [{"decision": t.decision, "stage": t.stage,
                             "next_stage": t.next_stage, "reasons": list(t.reasons)}
                            for t in snap.transitions],
        }


def _figure(f: FigureState) -> dict[str, Any]:
    c = f.check
    return {"value": c.value, "low": c.ci_low, "high": c.ci_high, "last_window": f.last,
            "per_window": list(f.history),
            "threshold": c.threshold, "direction": c.direction, "critical": c.critical,
            "windows": c.n, "status": c.status, "decision": DECISIONS.get(c.status, 0),
            "reason": c.reason}
