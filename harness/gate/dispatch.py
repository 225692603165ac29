"""What `layergate gate DIR` decides, always as a family (a single candidate or a sweep is a
family of one), by the fixed gate: replicate sweeps (`capacity --replicates`), one capacity
sweep, or a run, whose candidates may take their leaderboard saving from their sweeps
(`--capacity`); with the warnings the verdict needs beside it.

The capacity room writes the sweeps and reads them back as figures; it runs above the gate
(it replays and reports), so it hands the gate its readers (`Sweeps`) rather than the gate
importing it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from layergate.exporters.catalogue import BASELINE, CANDIDATE
from layergate.exporters.cli_options import named_values
from layergate.exporters.figures import Figure
from layergate.harness.gate.fixed.family import CapacityError, FamilyResult, evaluate_family
from layergate.harness.gate.fixed.result import GateResult
from layergate.harness.gate.policy import Policy
from layergate.harness.manifest import Manifest
from layergate.harness.rundir import Run, load_run
from layergate.harness.sweepdir import is_sweep

Busy = Callable[[str], AbstractContextManager]  # wraps a slow step: a spinner, or nothing


def quietly(_what: str) -> AbstractContextManager:
    return nullcontext()


@dataclass(frozen=True)
class Sweeps:
    """How the gate reads capacity sweeps (harness/capacity/verdict.py `SWEEPS`)."""

    replicated: Callable[[str | Path], bool]  # a directory of replicate sweeps
    replicates: Callable[[str | Path, Policy], GateResult]  # their verdict
    sweep: Callable[[str | Path, Policy], GateResult]  # one sweep's verdict
    ratio: Callable[[str | Path], Figure]  # a sweep's capacity ratio, for `--capacity`


@dataclass(frozen=True)
class GateOutcome:
    family: FamilyResult
    notes: tuple[str, ...] = ()  # said before the reports: "warning: ...", "note: ..."


def gate_dir(path: str | Path, policy: Policy, require: str, sweeps: Sweeps,
             capacity: tuple[str, ...] = (), busy: Busy = quietly) -> GateOutcome:
    """The verdict on the directory at `path`; `capacity`: `--capacity [NAME=]SWEEP_DIR`
    values (a run's only: a sweep is judged on its own figures)."""
    if sweeps.replicated(path):  # the capacity ratio across the replicates
        return GateOutcome(FamilyResult.of_one(sweeps.replicates(path, policy)))
    if is_sweep(path):
        with busy(f"judging the capacity sweep in {path}"):
            return GateOutcome(FamilyResult.of_one(sweeps.sweep(path, policy)))
    return gate_run(path, policy, require, capacity_ratios(capacity, sweeps), busy)


def capacity_ratios(values: tuple[str, ...], sweeps: Sweeps) -> dict[str, Figure]:
    """`--capacity [NAME=]SWEEP_DIR` values as candidate -> the sweep's capacity ratio (a
    bare SWEEP_DIR: the candidate `candidate`)."""
    try:
        paths = named_values(values, CANDIDATE, CANDIDATE)
    except ValueError as exc:
        raise CapacityError(f"--capacity: {exc}") from exc
    return {name: sweeps.ratio(path) for name, path in paths.items()}


def gate_run(run_dir: str | Path, policy: Policy, require: str,
             capacity: dict[str, Figure], busy: Busy = quietly) -> GateOutcome:
    """The family of the run in `run_dir` under `require`; `capacity`: candidate -> its
    sweep's capacity ratio, its saving on the leaderboard."""
    with busy(f"reading {run_dir}"):
        run = load_run(run_dir)
    with busy(f"computing figures for {run.result_count} results (bootstrap CIs)"):
        family = evaluate_family(run, policy, require, capacity=capacity)
    return GateOutcome(family, _notes(run, family, capacity))


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
