"""What `layergate gate DIR` judges, always as a family (a single candidate or a sweep is a
family of one): replicate sweeps (`capacity --replicates`), one capacity sweep, or a run,
whose candidates may take their leaderboard saving from their sweeps (`--capacity`). It
sits with the sweeps because it reads them; judging a run is the gate's."""

from __future__ import annotations

from pathlib import Path

from layergate.exporters.catalogue import CANDIDATE
from layergate.exporters.cli_options import named_values
from layergate.exporters.figures import Figure
from layergate.harness.capacity.replicates import is_replicated
from layergate.harness.capacity.verdict import capacity_ratio, evaluate_replicates, evaluate_sweep
from layergate.harness.gate.dispatch import Busy, Judged, judge_run, quietly
from layergate.harness.gate.fixed.family import CapacityError, FamilyResult
from layergate.harness.gate.policy import Policy
from layergate.harness.sweepdir import is_sweep


def judge_dir(path: str | Path, policy: Policy, require: str,
              capacity: tuple[str, ...] = (), busy: Busy = quietly) -> Judged:
    """The verdict on the directory at `path`; `capacity`: `--capacity [NAME=]SWEEP_DIR`
    values (a run's only: a sweep is judged on its own figures)."""
    if is_replicated(path):  # the capacity ratio across the replicates
        return Judged(FamilyResult.of_one(evaluate_replicates(path, policy)))
    if is_sweep(path):
        with busy(f"judging the capacity sweep in {path}"):
            return Judged(FamilyResult.of_one(evaluate_sweep(path, policy)))
    return judge_run(path, policy, require, capacity_ratios(capacity), busy)


def capacity_ratios(values: tuple[str, ...]) -> dict[str, Figure]:
    """`--capacity [NAME=]SWEEP_DIR` values as candidate -> the sweep's capacity ratio (a
    bare SWEEP_DIR: the candidate `candidate`)."""
    try:
        paths = named_values(values, CANDIDATE, CANDIDATE)
    except ValueError as exc:
        raise CapacityError(f"--capacity: {exc}") from exc
    return {name: capacity_ratio(path) for name, path in paths.items()}
