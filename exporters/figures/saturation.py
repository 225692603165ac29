"""Saturation: did an arm queue? Read from the stored per-request timings.

Replayed near an arm's capacity, requests wait in the server's queue, TTFT becomes mostly
queueing delay, and two identical arms can differ by tens of percent in latency: the
latency figures then measure the queue, not the candidate. An arm is saturated when any
of these shows (docs/METRICS.md):

- growth: in send order, the median TTFT of the last third of the run is at least
  GROWTH times the first third's, each third's at least THIRD_GROWTH times the one
  before (a queue that grows through the run, not one burst at its end: without it a
  stable M/D/4 queue at utilisation 0.5 was called saturated in 3.0 % of 5 s steps, at 0.7
  in 11.7 %), and TTFT rises with send time (Spearman rho >= RHO);
- far above unloaded: the median TTFT is at least FAR_ABOVE times the arm's unloaded TTFT
  (its 5th percentile: the requests that found the server idle);
- in flight at the limit: an open-loop replay had as many requests in flight on the arm
  as it allows (`max_in_flight`), so later ones waited in the replayer.

One figure per arm, `ttft_growth` (the growth ratio), with detail["saturated"] and the
signals in words; the gate makes a saturated run's latency verdicts inconclusive.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layergate.exporters.catalogue import RECORDED, TTFT_GROWTH
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.figures.aligned import Aligned

GROWTH = 2.0
THIRD_GROWTH = 1.25
RHO = 0.5
FAR_ABOVE = 10.0
MIN_REQUESTS = 9  # three per third
LOWER_THE_RATE = "lower the replay rate (--rate) and replay again"


@dataclass(frozen=True)
class Saturation:
    arm: str
    growth: float | None  # last third's median TTFT / the first third's
    rho: float | None
    over_unloaded: float | None  # median TTFT / 5th percentile
    peak_in_flight: int | None
    limit: int | None
    n: int
    signals: tuple[str, ...]
    # the signals of the run's order or of the replayer (growth, in flight at the limit),
    # which a resample of its requests cannot recompute; "far above unloaded" it can
    # (`far_above_unloaded`)
    held: tuple[str, ...] = ()

    @property
    def saturated(self) -> bool:
        return bool(self.signals)


def peak_in_flight(starts: np.ndarray, durations: np.ndarray) -> int:
    """Most requests in flight at once: [start, start + duration) intervals."""
    ok = np.isfinite(starts) & np.isfinite(durations)
    events = np.concatenate([np.stack([starts[ok], np.ones(ok.sum())], axis=1),
                             np.stack([starts[ok] + durations[ok], -np.ones(ok.sum())], axis=1)])
    if events.size == 0:
        return 0
    # at a tie an end comes before a start: back-to-back requests do not overlap
    events = events[np.lexsort((events[:, 1], events[:, 0]))]
    return int(np.cumsum(events[:, 1]).max())


def spearman_with_order(series: np.ndarray) -> float:
    """Spearman's rho of `series` against its order (0, 1, 2, ...): Pearson's correlation
    of their ranks, ties given their average rank (as scipy.stats.spearmanr; numpy here,
    as scipy.stats alone takes seconds to import)."""
    order = np.argsort(series, kind="mergesort")
    ordered = series[order]
    new = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    starts = np.concatenate([np.flatnonzero(new), [series.size]])
    group = np.cumsum(new) - 1
    ranks = np.empty(series.size)
    ranks[order] = 0.5 * (starts[group] + starts[group + 1] - 1) + 1  # average, 1-based
    return float(np.corrcoef(np.arange(1, series.size + 1), ranks)[0, 1])


def far_above_unloaded(ttft: np.ndarray) -> np.ndarray:
    """Per row of `ttft` (NaN: no TTFT), the "far above unloaded" signal of `detect`: the
    median at least FAR_ABOVE times the 5th percentile, over MIN_REQUESTS TTFTs or more."""
    counted = np.isfinite(ttft).sum(axis=1)
    out = np.zeros(ttft.shape[0], dtype=bool)
    rows = counted >= MIN_REQUESTS
    if rows.any():
        p5, median = np.nanquantile(ttft[rows], [0.05, 0.5], axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[rows] = (p5 > 0) & (median / p5 >= FAR_ABOVE)
    return out


def detect(al: Aligned, offsets: np.ndarray | None, limit: int | None) -> list[Saturation]:
    """One `Saturation` per measured arm; `offsets` are the rows' intended send times (NaN
    or None: unknown), `limit` the open-loop replay's max_in_flight (None: closed loop)."""
    out = []
    for arm, x in al.arms.items():
        if arm == RECORDED:
            continue
        ttft = np.where(x.ok, x.ttft, np.nan)
        has = np.isfinite(ttft)
        n = int(has.sum())
        signals: list[str] = []
        held: list[str] = []
        growth = rho = over = None
        if n >= MIN_REQUESTS:
            p5, median = np.quantile(ttft[has], [0.05, 0.5])
            over = float(median / p5) if p5 > 0 else None
            if over is not None and over >= FAR_ABOVE:
                signals.append(f"median TTFT {median * 1000:.0f} ms is {over:.0f}x its "
                               f"unloaded value ({p5 * 1000:.0f} ms, the 5th percentile)")
        if offsets is not None and n >= MIN_REQUESTS:
            timed = has & np.isfinite(offsets)
            order = np.argsort(offsets[timed], kind="stable")
            series = ttft[timed][order]
            if series.size >= MIN_REQUESTS:
                third = series.size // 3
                first, middle, last = (np.median(series[:third]),
                                       np.median(series[third:-third]),
                                       np.median(series[-third:]))
                growth = float(last / first) if first > 0 else None
                rho = 0.0 if np.ptp(series) == 0 else spearman_with_order(series)
                steady = first > 0 and min(middle / first, last / middle) >= THIRD_GROWTH
                if growth is not None and growth >= GROWTH and steady and rho >= RHO:
                    held.append(f"TTFT grew {growth:.1f}x through the run (median of the "
                                f"last third against the first, each third above the one "
                                f"before; Spearman rho {rho:.2f}): "
                                "queueing delay building up")
                    signals.append(held[-1])
        peak = None
        if offsets is not None:
            peak = peak_in_flight(np.where(x.present, offsets, np.nan),
                                  np.where(x.present, x.e2e, np.nan))
            if limit is not None and peak >= limit:
                held.append(f"{peak} requests in flight at once, the replay's limit "
                            f"(max_in_flight {limit})")
                signals.append(held[-1])
        out.append(Saturation(arm, growth, rho, over, peak, limit, n, tuple(signals),
                              tuple(held)))
    return out


def figures(found: list[Saturation]) -> list[Figure]:
    out = []
    for s in found:
        reason = "" if s.growth is not None else (
            "no send times (the run's traffic) or fewer than "
            f"{MIN_REQUESTS} requests with a TTFT")
        detail = {"saturated": s.saturated, "signals": list(s.signals), "rho": s.rho,
                  "ttft_over_unloaded": s.over_unloaded, "peak_in_flight": s.peak_in_flight,
                  "max_in_flight": s.limit}
        if s.saturated:
            detail["advice"] = LOWER_THE_RATE
        out.append(Figure(TTFT_GROWTH, s.growth, s.arm, OVERALL, n=s.n,
                          status="ok" if s.growth is not None else "not_computable",
                          reason=reason, detail=detail))
    return out


def saturated_arms(figs: list[Figure]) -> dict[str, list[str]]:
    """arm -> its saturation signals, for the arms whose `ttft_growth` says saturated."""
    return {f.arm: list(f.detail.get("signals") or ()) for f in figs
            if f.name == TTFT_GROWTH and f.scenario == OVERALL and f.detail.get("saturated")}


def not_comparable(queued: dict[str, list[str]]) -> str:
    """Why a saturated run's latency verdict is neither pass nor fail (`queued`: as
    `saturated_arms` gives it, not empty)."""
    arms = ", ".join(sorted(queued))
    return (f"saturated run ({arms} queued: {queued[sorted(queued)[0]][0]}): latency is not "
            f"comparable, so neither pass nor fail; {LOWER_THE_RATE}")
