"""The time ratios of a run whose arms did not send the same prompts (imported load-tool
runs: harness/results_import), where no request has a partner to be paired with.

latency_ratio, ttft_latency_ratio and tpot_latency_ratio are then the ratio of each arm's
geometric mean (per-token E2E, TTFT, TPOT) to the baseline's, and their intervals come from
resampling each arm's requests on its own (the baseline's resamples shared by every arm, so
an excess over the A' noise floor comes from the same draws), with the same between-process
term (exporters/figures/process_spread.py) and expanded percentile level the paired ones
use. An unpaired interval is wider than a paired one on the same data:
the requests' own spread is not cancelled. These replace the paired figures, which have no
pairs to compute from; every other figure stays as computed (and is insufficient where it
needs pairs)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from layergate.exporters.catalogue import (
    BASELINE,
    BASELINE2,
    CANDIDATE,
    LATENCY_RATIO,
    OVERALL,
    TPOT_LATENCY_RATIO,
    TTFT_LATENCY_RATIO,
    UNPAIRED,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.bootstrap import expanded, percentile_ci
from layergate.exporters.figures.columns import ResultColumns
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import status_for
from layergate.exporters.figures.process_spread import process_draws, spread, with_process

RATIOS = (LATENCY_RATIO, TTFT_LATENCY_RATIO, TPOT_LATENCY_RATIO)
CHUNK = 2_000_000  # resampled values held at once


def _logs(cols: ResultColumns, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Each ratio's per-request log value over `rows` (finite ones only)."""
    ok, tokens = cols.ok[rows], np.where(cols.tokens_counted[rows], cols.output_tokens[rows],
                                         np.nan)
    e2e, ttft = cols.e2e[rows], cols.ttft[rows]
    with np.errstate(divide="ignore", invalid="ignore"):
        values = {LATENCY_RATIO: np.where(ok & (tokens > 0), e2e / tokens, np.nan),
                  TTFT_LATENCY_RATIO: np.where(ok, ttft, np.nan),
                  TPOT_LATENCY_RATIO: np.where(ok & (tokens >= 2),
                                               (e2e - ttft) / (tokens - 1), np.nan)}
        logs = {k: np.log(v) for k, v in values.items()}
    return {k: v[np.isfinite(v)] for k, v in logs.items()}


def _resampled_means(x: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    if x.size == 0:
        return np.full(n_resamples, np.nan)
    per = max(1, CHUNK // x.size)
    out = [x[rng.integers(0, x.size, (min(per, n_resamples - i), x.size))].mean(axis=1)
           for i in range(0, n_resamples, per)]
    return np.concatenate(out)


def unpaired_figures(cols: ResultColumns, arms: Sequence[str], config: MetricsConfig,
                     scenarios: Sequence[str]) -> list[Figure]:
    """The three time ratios of every arm but the baseline, per scenario and overall."""
    out = []
    for label in (OVERALL, *scenarios):
        rows_of = {arm: np.flatnonzero((cols.arm == arm) & ((cols.scenario == label)
                                                             | (label == OVERALL)))
                   for arm in arms}
        logs = {arm: _logs(cols, rows) for arm, rows in rows_of.items()}
        for name in RATIOS:
            out += _ratio(name, label, logs, arms, config)
    return out


def _ratio(name: str, label: str, logs: dict[str, dict[str, np.ndarray]],
           arms: Sequence[str], config: MetricsConfig) -> list[Figure]:
    if BASELINE not in logs:
        return []
    rng = np.random.default_rng([config.seed, RATIOS.index(name)])
    base = logs[BASELINE][name]
    base_boot = _resampled_means(base, config.n_resamples, rng)
    found: dict[str, tuple[float | None, np.ndarray, int]] = {}
    for arm in arms:
        if arm == BASELINE:
            continue
        x = logs[arm][name]
        value = float(np.exp(x.mean() - base.mean())) if x.size and base.size else None
        boot = np.exp(_resampled_means(x, config.n_resamples, rng) - base_boot)
        found[arm] = (value, boot, int(min(x.size, base.size)))
    floor = found.get(BASELINE2)
    if config.process_spread > 0:  # each arm's server process, as the paired figures have
        draws = process_draws(config.n_resamples, config.seed, config.process_key)
        tau = spread(config.process_spread, *(floor[:2] if floor else (None, None)), "ratio")
        found = {arm: (v, with_process(b, "ratio", arm if arm in draws else CANDIDATE, tau,
                                       draws), n) for arm, (v, b, n) in found.items()}
        floor = found.get(BASELINE2)
    figures = []
    for arm, (value, boot, n) in found.items():
        level = expanded(config.confidence, n) if n > 1 else config.confidence
        low, high = percentile_ci(boot, level) if value is not None else (None, None)
        status, reason = status_for(value, n, config.min_samples,
                                    "no request of this arm or the baseline measured it")
        detail: dict = {"pairing": UNPAIRED, "n_arm": int(logs[arm][name].size),
                        "n_baseline": int(base.size)}
        noise = None
        if arm != BASELINE2 and value is not None:
            if floor is not None and floor[0] is not None:
                noise = floor[0]
                detail["excess"] = value - noise
                detail["excess_ci"] = list(percentile_ci(boot - floor[1], level))
                detail["noise_floor_n"] = floor[2]
            else:
                detail["excess"] = value - 1
                detail["excess_ci"] = [None if low is None else low - 1,
                                       None if high is None else high - 1]
                detail["excess_floor"] = "1 (no baseline2 arm: no difference)"
        figures.append(Figure(name=name, value=value, arm=arm, scenario=label, ci_low=low,
                              ci_high=high, n=n, status=status, reason=reason,
                              noise_floor=noise, detail=detail))
    return figures


def with_unpaired(figures: list[Figure], unpaired: list[Figure]) -> list[Figure]:
    """`figures` with each unpaired ratio in place of the paired one of the same name, arm
    and scenario (added where the paired calculation made none)."""
    new = {(f.name, f.arm, f.scenario): f for f in unpaired}
    kept = [new.pop((f.name, f.arm, f.scenario), None) or f for f in figures]
    return [*kept, *new.values()]
