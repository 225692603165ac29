"""Turn a statistic of resampled sums into Figures, overall and per scenario, with the
minimum-sample rule and, for paired comparisons, the noise floor and its excess."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from exporters.bootstrap import SumTable, percentile_ci
from exporters.catalogue import figure_spec
from exporters.config import MetricsConfig
from exporters.figures import OVERALL, Figure


@dataclass(frozen=True)
class SumStat:
    """A figure as `fn(*sums of columns)`; `count` is the column that counts its samples."""

    fn: Callable[..., Any]
    columns: tuple[str, ...]
    count: str
    undefined: str = "no data to compute it from"  # reason when the value is undefined


def scenarios(names: tuple[str, ...]) -> Iterator[tuple[str, int | None]]:
    """(scenario label, stratum index) for the overall figure and each scenario."""
    yield OVERALL, None
    yield from ((name, i) for i, name in enumerate(names))


def finite(x: float) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def status_for(value: float | None, n: int, minimum: int, undefined: str
               ) -> tuple[str, str]:
    if value is None:
        return "not_computable", undefined
    if n < minimum:
        return "insufficient", f"{n} samples, fewer than the minimum of {minimum}"
    return "ok", ""


def estimate(table: SumTable, stat: SumStat, scenario_names: tuple[str, ...],
             config: MetricsConfig, name: str, arm: str,
             noise: SumStat | None = None,
             detail: Callable[[int | None], dict[str, Any]] | None = None) -> list[Figure]:
    """One Figure per scenario (and overall). With `noise` (the same statistic for A' vs A),
    `noise_floor` is set and, for a figure catalogued with an excess, detail["excess"] /
    ["excess_ci"] too, from the same resamples."""
    excess = figure_spec(name).excess
    out = []
    for label, stratum in scenarios(scenario_names):
        value, boot = table.evaluate(stat.fn, stat.columns, stratum)
        n = int(round(table.sums(stat.count, stratum)[0]))
        value = finite(value)
        low, high = percentile_ci(boot, config.confidence) if value is not None else (None, None)
        status, reason = status_for(value, n, config.min_samples, stat.undefined)
        extra: dict[str, Any] = detail(stratum) if detail else {}
        floor = None
        if noise is not None:
            floor_value, floor_boot = table.evaluate(noise.fn, noise.columns, stratum)
            floor = finite(floor_value)
            extra["noise_floor_n"] = int(round(table.sums(noise.count, stratum)[0]))
            if excess and value is not None and floor is not None:
                extra["excess"] = value - floor
                e_low, e_high = percentile_ci(boot - floor_boot, config.confidence)
                extra["excess_ci"] = [e_low, e_high]
        out.append(Figure(name=name, value=value, arm=arm, scenario=label, ci_low=low,
                          ci_high=high, n=n, status=status, reason=reason, noise_floor=floor,
                          detail=extra))
    return out


def ratio(num: np.ndarray | float, den: np.ndarray | float) -> np.ndarray | float:
    return np.divide(num, den)
