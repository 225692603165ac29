"""The release gate: a policy (YAML) applied to a run's figures gives pass / fail /
inconclusive, fail-closed, with a staged-rollout recommendation.

This module is the gate's one door: every other room imports the gate from here, never
from the modules behind it (tests/test_imports.py holds it). Behind it, two machines:

- `fixed/`: one look at a finished run, every figure over all its requests; its verb is
  *evaluate* (`evaluate`, `evaluate_run`, `evaluate_family`), its answer a `GateResult`
  per candidate and a `FamilyResult` per run;
- `sequential/`: the requests in send order with anytime-valid intervals, looked at after
  each one; its verb is *decide* (`decide`, `decide_family`; `until_decided`, the
  replay's stop predicate), its answer a `SequentialDecision` per candidate and a
  `SequentialFamily` per run.

Both read the policy (`policy.py`), word a figure's check alike (`checks.py`) and see a
run's candidates alike (`candidates.py`). `dispatch.py` says which verdict a directory
gets (`gate_dir`: a run, a capacity sweep, replicate sweeps).
"""

from __future__ import annotations

from layergate.harness.gate.candidates import RequireError
from layergate.harness.gate.checks import INFO, SKIPPED, Check, check_figure, names_arm
from layergate.harness.gate.dispatch import Busy, GateOutcome, Sweeps, gate_dir, quietly
from layergate.harness.gate.fixed.compare import Change, Comparison, compare_runs
from layergate.harness.gate.fixed.evaluation import evaluate, evaluate_run
from layergate.harness.gate.fixed.family import (
    CandidateVerdict,
    CapacityError,
    FamilyResult,
    evaluate_family,
)
from layergate.harness.gate.fixed.recommendation import Rollout
from layergate.harness.gate.fixed.result import GateResult
from layergate.harness.gate.fixed.run_view import RunView, view_config, view_run
from layergate.harness.gate.fixed.saving import Estimate, Saving
from layergate.harness.gate.fixed.verdict import apply_policy
from layergate.harness.gate.policy import (
    DEFAULT_PROCESS_SPREAD,
    POLICY_HELP,
    MetricRule,
    Policy,
    PolicyError,
    flattened,
    load_policy,
    parse_policy,
)
from layergate.harness.gate.sequential.config import SequentialConfig
from layergate.harness.gate.sequential.decision import SequentialDecision, decide
from layergate.harness.gate.sequential.family import SequentialFamily, decide_family
from layergate.harness.gate.sequential.stop import until_decided

__all__ = [
    # the policy
    "DEFAULT_PROCESS_SPREAD", "POLICY_HELP", "MetricRule", "Policy", "PolicyError",
    "flattened", "load_policy", "parse_policy",
    # a directory's verdict (`layergate gate DIR`)
    "Busy", "CapacityError", "GateOutcome", "RequireError", "Sweeps", "gate_dir", "quietly",
    # the fixed gate
    "CandidateVerdict", "Change", "Check", "Comparison", "Estimate", "FamilyResult",
    "GateResult", "INFO", "Rollout", "RunView", "SKIPPED", "Saving", "apply_policy",
    "check_figure", "compare_runs", "evaluate", "evaluate_family", "evaluate_run",
    "names_arm", "view_config", "view_run",
    # the sequential gate
    "SequentialConfig", "SequentialDecision", "SequentialFamily", "decide", "decide_family",
    "until_decided",
]
