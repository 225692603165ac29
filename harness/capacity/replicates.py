"""Replicate sweeps (`layergate capacity --replicates R`): R ladders of the same arms, each
from its own seed and its own dithered start, and the capacity ratio's interval across
them (exporters/figures/capacity_replicates.py).

One sweep's interval covered the true ratio in 31-48 % of simulated sweeps: a fresh
arrival schedule and a ladder whose grid falls elsewhere move the knee by more than the
requests' own noise. Replicates make both visible. The start of replicate i is
start / factor ** U_i, U_i uniform on [0, 1) from its seed (never above the start asked
for: dithered upward, a replicate started past the baseline's capacity and had no ratio
on the slot servers), so the steps of the replicates
fall at different loads: the interpolation's bias, which depends on where the knee lies
between two steps, becomes spread across replicates, which the interval sees (a fixed grid
left the 1.2 truth's interval 9 % too low).

With `--restart CMD` the arms are restarted before each replicate (harness/capacity/
restart.py): the replicates then differ by their processes too, and the interval takes the
processes' spread from theirs (the signed-rank interval, from 6 replicates) instead of
adding the `--process-spread` prior.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.catalogue import CANDIDATE, CAPACITY_RATIO, COMPLETE, ExitCode
from layergate.exporters.figures.capacity_replicates import replicated_ratio, restarted_ratio
from layergate.harness.capacity.config import RESTARTED_LEAST, USERS, CapacityConfig
from layergate.harness.capacity.report import sweep_figures
from layergate.harness.capacity.restart import restart_arms
from layergate.harness.sweepdir import SweepDir

REPORT = "replicates.json"


def dithered(start: float, factor: float, seed: int, users: bool = False) -> float:
    """The ladder's start for one replicate: start / factor ** U, U ~ U[0, 1) from `seed`
    (users: rounded, at least 1)."""
    load = start / factor ** random.Random(seed).random()
    return float(max(1, round(load))) if users else float(f"{load:.4g}")


def replicate_config(config: CapacityConfig, i: int) -> CapacityConfig:
    """Replicate i's sweep: its own directory, seed and dithered start. It keeps the run's
    --replicates and --restart: its state records that it is one of R, restarted or not."""
    seed = config.seed + i
    return dataclasses.replace(
        config, out=config.out / f"replicate-{i:02d}", seed=seed,
        start=dithered(config.start, config.factor, seed, config.load == USERS),
        resume=(config.out / f"replicate-{i:02d}").exists())


def run_replicates(config: CapacityConfig, run: Callable[[CapacityConfig], Any],
                   echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or resume) each replicate with `run` (layergate.harness.capacity.sweep.run_capacity),
    after `--restart`'s command when given, then write and return the replicates' report
    (OUT/replicates.json)."""
    config.out.mkdir(parents=True, exist_ok=True)
    for i in range(config.replicates):
        sub = replicate_config(config, i)
        if sub.resume and SweepDir(sub.out).read().status == COMPLETE:
            continue  # done in an earlier call
        if config.restart:
            took = restart_arms(config.restart, config.arms, config.restart_timeout)
            echo(f"replicate {sub.out.name}: arms restarted, answering after {took:.1f}s")
        run(sub)
    report = replicates_report(config)
    write_json_atomic(config.out / REPORT, report)
    return report


def replicates_report(config: CapacityConfig) -> dict[str, Any]:
    """Each replicate's ratio and the interval across them, with how many replicates the
    target half-width needs."""
    rows = []
    for i in range(config.replicates):
        sub = replicate_config(config, i)
        sweep = SweepDir(sub.out)
        if not sweep.exists():
            rows.append({"dir": sub.out.name, "ratio": None, "why": "not run"})
            continue
        state = sweep.read()
        stored = dataclasses.replace(sub, resume=False)
        fig = next((f for f in sweep_figures(state, stored)
                    if f.name == CAPACITY_RATIO and f.arm == CANDIDATE), None)
        rows.append({"dir": sub.out.name, "seed": sub.seed, "start": sub.start,
                     # the sweep stores the config it started with: a restart ran before it
                     "restarted": bool(state.config.get("restart")),
                     "ratio": fig.value if fig is not None else None,
                     "why": fig.reason if fig is not None and fig.value is None else ""})
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    # every replicate on processes of its own: their spread is in the ratios' (no prior)
    restarted = bool(ratios) and all(r["restarted"] for r in rows if r["ratio"] is not None)
    out: dict[str, Any] = {"kind": "capacity-replicates", "replicates": rows,
                           "restarted": restarted,
                           "process_spread": 0.0 if restarted else config.process_spread,
                           "target_half_width_log": config.target_half_width}
    least = RESTARTED_LEAST if restarted else 2
    if len(ratios) < least:
        out[CAPACITY_RATIO] = None
        out["why"] = (f"{len(ratios)} replicate(s) with a ratio: an interval needs {least}"
                      + (" on restarted arms (signed-rank at 95 %)" if restarted else ""))
        return out
    got = restarted_ratio(ratios) if restarted else \
        replicated_ratio(ratios, out["process_spread"])
    out[CAPACITY_RATIO] = {
        "value": got.value, "ci_low": got.low, "ci_high": got.high, "unit": "ratio",
        "confidence": got.confidence, "method": got.method, "replicates": got.replicates,
        "sd_log": got.sd_log, "half_width_log": got.half_width_log}
    needed = got.replicates_for(config.target_half_width)
    out["replicates_for_target"] = needed
    out["target_text"] = (
        f"{needed} replicates for a log half-width of {config.target_half_width:g}"
        if needed is not None else
        f"no number of replicates reaches a log half-width of {config.target_half_width:g}: "
        f"the process term alone (tau {out['process_spread']:g}) is wider")
    return out


def replicates_exit(report: dict[str, Any]) -> ExitCode:
    """0 when the replicates gave the ratio an interval, 3 (inconclusive) when too few did."""
    return ExitCode.PASS if report.get(CAPACITY_RATIO) else ExitCode.INCONCLUSIVE


def replicates_lines(report: dict[str, Any]) -> list[str]:
    """The replicates' report in words."""
    lines = [f"replicate {r['dir']}: ratio "
             f"{'n/a (' + r['why'] + ')' if r['ratio'] is None else format(r['ratio'], '.3f')}"
             for r in report["replicates"]]
    ratio = report.get(CAPACITY_RATIO)
    if ratio is None:
        return [*lines, f"{CAPACITY_RATIO} across replicates: n/a ({report['why']})"]
    processes = ("signed-rank; each replicate on restarted arms: the processes' spread "
                 "is the replicates'" if report.get("restarted") else
                 f"the same processes throughout: between-process tau "
                 f"{report['process_spread']:g}")
    return [*lines, f"capacity_ratio across {ratio['replicates']} replicates: "
            f"{ratio['value']:.3f} [{ratio['ci_low']:.3f}, {ratio['ci_high']:.3f}] "
            f"({ratio['confidence']:.1%}, log ratio; {processes})", report["target_text"]]


def is_replicated(path: str | Path) -> bool:
    return (Path(path) / REPORT).is_file()
