"""`layergate gate RUN_DIR` on a run: its candidates judged as a family (a single
candidate is a family of one), with the warnings the verdict needs beside it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from layergate.exporters.catalogue import BASELINE
from layergate.exporters.figures import Figure
from layergate.harness.gate.fixed.family import FamilyResult, evaluate_family
from layergate.harness.gate.policy import Policy
from layergate.harness.manifest import Manifest
from layergate.harness.rundir import Run, load_run

Busy = Callable[[str], AbstractContextManager]  # wraps a slow step: a spinner, or nothing


def quietly(_what: str) -> AbstractContextManager:
    return nullcontext()


@dataclass(frozen=True)
class Judged:
    family: FamilyResult
    notes: tuple[str, ...] = ()  # said before the reports: "warning: ...", "note: ..."


def judge_run(run_dir: str | Path, policy: Policy, require: str,
              capacity: dict[str, Figure], busy: Busy = quietly) -> Judged:
    """The family of the run in `run_dir` under `require`; `capacity`: candidate -> its
    sweep's capacity ratio, its saving on the leaderboard."""
    with busy(f"reading {run_dir}"):
        run = load_run(run_dir)
    with busy(f"computing figures for {run.result_count} results (bootstrap CIs)"):
        family = evaluate_family(run, policy, require, capacity=capacity)
    return Judged(family, _notes(run, family, capacity))


def _notes(run: Run, family: FamilyResult, capacity: dict[str, Figure]) -> tuple[str, ...]:
    notes = [f"warning: imported with --allow: {w}"
             for w in run.manifest.imported.get("warnings", [])]
    stopped = optional_stopping(run.manifest)
    if stopped:
        notes.append(f"warning: {stopped}")
    for name, ratio in capacity.items():
        if ratio.detail.get(BASELINE) != run.manifest.arms.get(BASELINE):
            notes.append(f"note: --capacity {name}: the sweep's baseline "
                         f"({ratio.detail.get(BASELINE)}) is not the run's "
                         f"({run.manifest.arms.get(BASELINE)}): its capacity ratio is "
                         "against another baseline")
    if family.only is not None and capacity:
        notes.append("note: --capacity ranks candidates on the leaderboard; a run with one "
                     "candidate has none (gate the sweep itself: layergate gate SWEEP_DIR)")
    return tuple(notes)


def optional_stopping(manifest: Manifest) -> str | None:
    """Why the fixed gate's intervals do not hold on a run stopped by `--until-decided`
    (None when it was not): they assume the sample size was fixed before the first look."""
    stopped = sorted(manifest.arms_stopped) if manifest.arms_stopped else []
    if not manifest.stopped_early and not stopped:
        return None
    which = f" (stopped: {', '.join(stopped)})" if stopped else ""
    return (f"this run was stopped early by --until-decided{which}: the fixed gate's "
            "intervals assume a sample size fixed in advance and do not hold after optional "
            "stopping; judge it with `layergate gate --sequential` (the verdict it stopped on)")
