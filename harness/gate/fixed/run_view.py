"""A run's figures as `layergate metrics` shows, writes and serves them: computed with the
command line's settings over the policy's over the defaults, each candidate's on the arm of
its name, and (with a policy) the gate's verdict on those very figures, never on a second
computation with other settings."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from layergate.exporters.figures import Figure
from layergate.exporters.figures.config import MetricsConfig
from layergate.harness.gate.fixed.evaluation import evaluate_figures, metrics_config
from layergate.harness.gate.fixed.family import (
    FamilyResult,
    candidate_figures,
    candidates_of,
    evaluate_family,
)
from layergate.harness.gate.fixed.result import GateResult
from layergate.harness.gate.policy import Policy
from layergate.harness.rundir import Run


@dataclass(frozen=True)
class RunView:
    run: Run
    figures: list[Figure]
    gate: GateResult | FamilyResult | None  # None: no policy given

    @property
    def verdict(self) -> str | None:
        return self.gate.verdict if self.gate is not None else None

    def thresholds(self) -> dict[tuple[str, str, str], float]:
        """(figure, arm, scenario) -> the policy's threshold, for the figures it gates."""
        if self.gate is None:
            return {}
        return {(c.name, c.arm, c.scenario): c.threshold for c in self.gate.checks
                if c.threshold is not None}


def view_config(run: Run, policy: Policy | None, given: dict[str, Any]) -> MetricsConfig:
    """The settings given on the command line over the gate's (with a policy: its target,
    its smallest min_samples) over the defaults; the tokenizer defaults to the one the run
    counted with."""
    base = metrics_config(policy, run) if policy is not None else MetricsConfig()
    return replace(base, **{"tokenizer": run.tokenizer, **given})


def view_run(run: Run, policy: Policy | None, config: MetricsConfig) -> RunView:
    """The same rows and figures as the gate's; with several candidates, each judged at its
    adjusted confidence."""
    figures = candidate_figures(run, config)
    if policy is None:
        return RunView(run, figures, None)
    if len(candidates_of(run)) > 1:
        return RunView(run, figures, evaluate_family(run, policy))
    return RunView(run, figures, evaluate_figures(run, policy, figures))
