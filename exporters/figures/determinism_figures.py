"""The determinism figures of each arm, from a repeat suite (the same prompts sent N times).

output_determinism   share of prompts whose repeats are all the same output as the first
                     (layergate.exporters.catalogue.same_output); per concurrency level in detail
resource_determinism mean over prompts of the standard deviation of per-request peak
                     memory across repeats (bytes, from the `layergate` extension)
latency_determinism  P99 / P50 of E2E over all repeats (conservative CI from the
                     order-statistic CIs of both percentiles)
A prompt is one (request id, concurrency level); it counts when >= 2 repeats succeeded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from layergate.exporters.catalogue import (
    LATENCY_DETERMINISM,
    OUTPUT_DETERMINISM,
    RESOURCE_DETERMINISM,
    arm_lacks,
    same_output,
)
from layergate.exporters.figures import Figure
from layergate.exporters.figures.bootstrap import resample_sums
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.estimate import SumStat, estimate, scenarios, status_for
from layergate.exporters.figures.stats import quantile_ci
from layergate.exporters.records import ArmResult

Key = tuple[str, str, str, int]  # scenario, arm, request id, concurrency


def _identical(rows: list[ArmResult]) -> bool:
    return all(same_output(rows[0], r) for r in rows[1:])


def _groups(results: Iterable[ArmResult]) -> dict[Key, list[ArmResult]]:
    groups: dict[Key, list[ArmResult]] = defaultdict(list)
    for r in results:
        groups[(r.scenario, r.arm, r.request_id, r.concurrency)].append(r)
    return {k: sorted(v, key=lambda r: r.repeat) for k, v in sorted(groups.items())}


def _memory_std(rows: list[ArmResult]) -> float:
    mem = [r.extension.get("peak_memory_bytes") for r in rows]
    mem = [float(m) for m in mem if isinstance(m, int | float)]
    return float(np.std(mem)) if len(mem) == len(rows) else np.nan


def figures(results: Iterable[ArmResult], config: MetricsConfig) -> list[Figure]:
    groups = _groups(results)
    if not groups:
        return []
    keys = list(groups)
    names = tuple(sorted({k[0] for k in keys}))
    strata = np.array([names.index(k[0]) for k in keys])
    arms = sorted({k[1] for k in keys})
    ok_rows = {k: [r for r in v if r.ok] for k, v in groups.items()}
    counted = np.array([len(ok_rows[k]) >= 2 for k in keys])
    same = np.array([c and _identical(ok_rows[k]) for k, c in zip(keys, counted, strict=True)])
    mem = np.array([_memory_std(ok_rows[k]) if c else np.nan
                    for k, c in zip(keys, counted, strict=True)])
    cols: dict[str, np.ndarray] = {}
    for arm in arms:
        mine = np.array([k[1] == arm for k in keys]) & counted
        cols |= {f"det.{arm}.n": mine.astype(float), f"det.{arm}.same": (mine & same) * 1.0,
                 f"det.{arm}.mem_n": (mine & np.isfinite(mem)) * 1.0,
                 f"det.{arm}.mem": np.where(mine & np.isfinite(mem), mem, 0.0)}
    table = resample_sums(cols, strata, len(names), config.n_resamples, config.seed)
    cfg = MetricsConfig(**{**config.as_dict(), "min_samples": config.min_determinism_prompts})
    extension = {r.arm for rows in ok_rows.values() for r in rows if r.extension}
    out: list[Figure] = []
    for arm in arms:
        p = f"det.{arm}."
        no_memory = "the arm reported no peak_memory_bytes" if arm in extension \
            else arm_lacks(arm, "extension")

        def by_concurrency(stratum: int | None, arm: str = arm) -> dict:
            levels: dict[int, list[bool]] = defaultdict(list)
            for k, c, s in zip(keys, counted, same, strict=True):
                if k[1] == arm and c and (stratum is None or k[0] == names[stratum]):
                    levels[k[3]].append(bool(s))
            return {"by_concurrency": {str(c): float(np.mean(v))
                                       for c, v in sorted(levels.items())}}

        out += estimate(table, SumStat(lambda s, n: s / n, (p + "same", p + "n"), p + "n",
                                       "no prompt with two successful repeats"),
                        names, cfg, OUTPUT_DETERMINISM, arm, detail=by_concurrency)
        out += estimate(table, SumStat(lambda m, n: m / n, (p + "mem", p + "mem_n"), p + "mem_n",
                                       no_memory),
                        names, cfg, RESOURCE_DETERMINISM, arm)
        out += _latency(groups, names, arm, cfg)
    return out


def _latency(groups: dict[Key, list[ArmResult]], names: tuple[str, ...], arm: str,
             config: MetricsConfig) -> list[Figure]:
    out = []
    for label, stratum in scenarios(names):
        e2e = np.array([r.e2e_s for k, v in groups.items() for r in v
                        if k[1] == arm and r.ok and r.e2e_s is not None
                        and (stratum is None or k[0] == label)], dtype=float)
        p50, l50, h50 = quantile_ci(e2e, 0.5, config.confidence)
        p99, l99, h99 = quantile_ci(e2e, 0.99, config.confidence)
        value = p99 / p50 if p50 else None
        low = l99 / h50 if l99 is not None and h50 else None
        high = h99 / l50 if h99 is not None and l50 else None
        prompts = len({k for k in groups if k[1] == arm and (stratum is None or k[0] == label)})
        status, reason = status_for(value, prompts, config.min_samples, "no E2E measured")
        out.append(Figure(LATENCY_DETERMINISM, value, arm, label, low, high, prompts, status,
                          reason, detail={"requests": int(e2e.size)}))
    return out
