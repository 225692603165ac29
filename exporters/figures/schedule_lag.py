"""Schedule fidelity: how far behind its intended time each request went out (the
replayer's lag, `ArmResult.send_lag_s`), at p50, p99 and max. A replay whose lag is large
measured the load tool, not the arms: the gate bounds its p99 (policy key
`max_send_lag_p99_s`, docs/FORMATS.md) and is inconclusive past it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ScheduleLag:
    n: int  # sends measured
    p50_s: float
    p99_s: float
    max_s: float

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "lag_p50_s": self.p50_s, "lag_p99_s": self.p99_s,
                "lag_max_s": self.max_s}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ScheduleLag:
        return cls(obj["n"], obj["lag_p50_s"], obj["lag_p99_s"], obj["lag_max_s"])

    def words(self) -> str:
        return (f"sends lagged their intended times by p50 {_ms(self.p50_s)}, p99 "
                f"{_ms(self.p99_s)}, max {_ms(self.max_s)} ({self.n} sends)")


def schedule_lag(lags: Iterable[float | None] | np.ndarray) -> ScheduleLag | None:
    """The lag quantiles of the sends that recorded one (an array: the lags recorded);
    None when none did (a run older than the field)."""
    values = lags if isinstance(lags, np.ndarray) else np.fromiter(
        (x for x in lags if x is not None), dtype=float)
    if not len(values):
        return None
    p50, p99 = np.quantile(values, [0.5, 0.99])
    return ScheduleLag(len(values), round(float(p50), 6), round(float(p99), 6),
                       round(float(values.max()), 6))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if abs(seconds) < 1 else f"{seconds:.2f} s"
