"""Turn a statistic of resampled sums into Figures, overall and per scenario, with the
minimum-sample rule and, for paired comparisons, the noise floor and its excess."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from layergate.exporters.catalogue import BASELINE2, CANDIDATE, figure_spec
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.figures.bootstrap import SumTable, expanded, percentile_ci
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.process_spread import process_draws, spread, with_process


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
    ["excess_ci"] too, from the same resamples. A timing figure's resamples carry the
    between-process term (exporters/figures/process_spread.py) before any interval is read."""
    spec = figure_spec(name)
    draws = process_draws(config.n_resamples, config.seed, config.process_key) \
        if spec.timing else {}
    out = []
    for label, stratum in scenarios(scenario_names):
        value, boot = table.evaluate(stat.fn, stat.columns, stratum)
        n = int(round(table.sums(stat.count, stratum)[0]))
        value = finite(value)
        extra: dict[str, Any] = detail(stratum) if detail else {}
        floor = floor_boot = None
        if noise is not None:
            floor_value, floor_boot = table.evaluate(noise.fn, noise.columns, stratum)
            floor = finite(floor_value)
            extra["noise_floor_n"] = int(round(table.sums(noise.count, stratum)[0]))
        if spec.timing and config.process_spread > 0:
            tau = spread(config.process_spread, floor, floor_boot, spec.timing)
            boot = with_process(boot, spec.timing, arm, tau, draws)
            if floor_boot is not None:
                floor_boot = with_process(floor_boot, spec.timing, BASELINE2, tau, draws)
            extra["process_spread"] = tau
        if config.keep_resamples is not None:
            config.keep_resamples[(name, arm, label)] = boot
        # timing figures and some others: the expanded percentile interval (calibrated at
        # small n)
        level = expanded(config.confidence, n) if spec.expands else config.confidence
        low, high = percentile_ci(boot, level) if value is not None else (None, None)
        status, reason = status_for(value, n, config.min_samples, stat.undefined)
        if spec.excess and value is not None and floor is not None:
            extra["excess"] = value - floor
            e_low, e_high = percentile_ci(boot - floor_boot, level)
            extra["excess_ci"] = [e_low, e_high]
        elif spec.timing == "ratio" and spec.excess and noise is None and arm == CANDIDATE \
                and value is not None:
            # no second baseline: the floor of a time ratio is 1, no difference
            extra["excess"] = value - 1
            extra["excess_ci"] = [None if low is None else low - 1,
                                  None if high is None else high - 1]
            extra["excess_floor"] = "1 (no baseline2 arm: no difference)"
        out.append(Figure(name=name, value=value, arm=arm, scenario=label, ci_low=low,
                          ci_high=high, n=n, status=status, reason=reason, noise_floor=floor,
                          detail=extra))
    return out


def ratio(num: np.ndarray | float, den: np.ndarray | float) -> np.ndarray | float:
    return np.divide(num, den)
