"""One arm at one step of a capacity sweep: which measured requests met the SLO, errors,
saturation and latency percentiles. `StepArm` is what the sweep stores per step and what
`layergate.exporters.figures.capacity` judges; it is built from the step's results only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from layergate.exporters.figures import saturation
from layergate.exporters.figures.aligned import align
from layergate.exporters.figures.slo import SLO
from layergate.exporters.records import ArmResult

PERCENTILES = (50, 90)
LATENCIES = ("ttft", "tpot", "e2e")


@dataclass(frozen=True)
class StepArm:
    """`met[i]`: the i-th measured request (in request-id order, the same order for every
    arm of a step) succeeded within the SLO. `window_s`: from the first measured send to
    the last answer, the time the goodput is over. `saturated`: the saturation detector's
    signals (empty: not saturated), `held` those of them a resample of the requests cannot
    recompute (the run's order, the replayer's limit). `failed[i]` and `ttft[i]` (None:
    none, or the request failed): the i-th request's, for the resamples to judge errors
    and "far above unloaded" again (empty in sweeps stored before they were kept: the
    flags are then held). `theoretical`: the engine's mean reported saving (None: the
    arm does not report one)."""

    arm: str
    load: float
    met: tuple[bool, ...]
    errors: int
    window_s: float
    saturated: tuple[str, ...] = ()
    percentiles: dict[str, float | None] = field(default_factory=dict)
    theoretical: float | None = None
    held: tuple[str, ...] = ()
    failed: tuple[bool, ...] = ()
    ttft: tuple[float | None, ...] = ()

    @property
    def resamplable(self) -> bool:
        """Whether the per-request outcomes are kept (the flags recomputed per resample)."""
        return len(self.failed) == self.n and len(self.ttft) == self.n

    @property
    def n(self) -> int:
        return len(self.met)

    @property
    def attainment(self) -> float:
        return sum(self.met) / self.n if self.n else 0.0

    @property
    def error_rate(self) -> float:
        return self.errors / self.n if self.n else 1.0

    @property
    def goodput(self) -> float:
        """Requests per second that met the SLO."""
        return sum(self.met) / self.window_s if self.window_s > 0 else 0.0

    def passes(self, attainment: float, max_error_rate: float) -> bool:
        return (self.n > 0 and self.attainment >= attainment
                and self.error_rate <= max_error_rate and not self.saturated)

    def why_not(self, attainment: float, max_error_rate: float) -> str:
        """Why the step failed, in words ("" when it passed)."""
        if self.n == 0:
            return "no measured request"
        if self.attainment < attainment:
            return f"SLO attainment {self.attainment:.3f} < {attainment:g}"
        if self.error_rate > max_error_rate:
            return f"error rate {self.error_rate:.3f} > {max_error_rate:g}"
        if self.saturated:
            return f"saturated: {self.saturated[0]}"
        return ""

    def to_json(self) -> dict[str, Any]:
        return {"arm": self.arm, "load": self.load,
                "met": "".join("1" if m else "0" for m in self.met), "errors": self.errors,
                "window_s": self.window_s, "saturated": list(self.saturated),
                "percentiles": self.percentiles, "theoretical": self.theoretical,
                "held": list(self.held), "failed": "".join("1" if f else "0" for f in self.failed),
                "ttft": [None if t is None else round(t, 6) for t in self.ttft]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StepArm:
        return cls(d["arm"], float(d["load"]), tuple(c == "1" for c in d["met"]),
                   int(d["errors"]), float(d["window_s"]), tuple(d.get("saturated", ())),
                   dict(d.get("percentiles", {})), d.get("theoretical"),
                   tuple(d.get("held", d.get("saturated", ()))),
                   tuple(c == "1" for c in d.get("failed", "")), tuple(d.get("ttft", ())))


def _percentiles(rows: Sequence[ArmResult]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    values = {"ttft": [r.ttft_s for r in rows], "tpot": [r.tpot_s for r in rows],
              "e2e": [r.e2e_s for r in rows]}
    for kind in LATENCIES:
        xs = np.array([v for v, r in zip(values[kind], rows, strict=True)
                       if v is not None and r.ok], dtype=float)
        for q in PERCENTILES:
            out[f"{kind}_p{q}"] = float(np.percentile(xs, q)) if xs.size else None
    return out


def step_arms(results: Sequence[ArmResult], sent_at: dict[str, float], load: float,
              slo: SLO, warmup_s: float, limit: int | None) -> list[StepArm]:
    """One `StepArm` per arm of a step. `sent_at`: request id -> intended send time (s);
    requests intended within the first `warmup_s` are the warm-up and not counted.
    `limit`: the open-loop replay's max_in_flight (None: closed loop)."""
    if not sent_at:
        return []
    start = min(sent_at.values())
    measured = [r for r in results if sent_at.get(r.request_id, -1.0) - start >= warmup_s]
    by_arm: dict[str, list[ArmResult]] = {}
    for r in sorted(measured, key=lambda r: r.request_id):
        by_arm.setdefault(r.arm, []).append(r)
    al = align(measured)
    offsets = np.array([sent_at.get(rid, np.nan) for rid in al.request_ids], dtype=float)
    found = {s.arm: s for s in saturation.detect(al, offsets, limit)}
    out = []
    for arm, rows in by_arm.items():
        sends = sorted(sent_at[r.request_id] for r in rows)
        # the n sends span n - 1 gaps: n mean gaps is n / the rate sent; the answers may
        # take longer than that (a closed loop sends a user's first requests at once)
        gaps = (sends[-1] - sends[0]) * len(sends) / (len(sends) - 1) if len(sends) > 1 \
            else 0.0
        done = max(sent_at[r.request_id] + (r.e2e_s or 0.0) for r in rows) - sends[0]
        window = max(gaps, done)
        saving = [r.extension["theoretical_saving"] for r in rows
                  if isinstance(r.extension.get("theoretical_saving"), (int, float))]
        sat = found.get(arm)
        out.append(StepArm(arm, load, tuple(slo.meets(r) for r in rows),
                           sum(not r.ok for r in rows), window,
                           sat.signals if sat else (), _percentiles(rows),
                           float(np.mean(saving)) if saving else None,
                           sat.held if sat else (), tuple(not r.ok for r in rows),
                           tuple(r.ttft_s if r.ok else None for r in rows)))
    return out
