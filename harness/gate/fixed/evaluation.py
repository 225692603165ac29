"""`evaluate(run_dir, policy)`: read a run, compute its figures, apply the policy."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from layergate.exporters.catalogue import DETERMINISM_FIGURES, UNPAIRED
from layergate.exporters.figures.accuracy import read_references, read_verdicts
from layergate.exporters.figures.columns import ResultColumns
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.conversations import conversations, turn_positions
from layergate.harness.gate.fixed.result import GateResult
from layergate.harness.gate.fixed.unpaired import unpaired_figures, with_unpaired
from layergate.harness.gate.fixed.verdict import apply_policy
from layergate.harness.gate.policy import Policy, load_policy
from layergate.harness.rundir import TRAFFIC, Run, RunDirError, load_run


def evaluate(run_dir: str | Path, policy_path: str | Path | Policy | None = None) -> GateResult:
    """The gate's verdict on `run_dir`.

    Raises `PolicyError` for a bad policy (a usage error) and `RunDirError` for a run
    directory that cannot be read (an infrastructure error). The policy is read first,
    so a typo in it is reported even when the run is also broken.
    """
    policy = policy_path if isinstance(policy_path, Policy) else load_policy(policy_path)
    run = load_run(run_dir)
    return evaluate_run(run, policy)


def metrics_config(policy: Policy, run: Run) -> MetricsConfig:
    """How the gate computes figures: the policy's target and process spread and, as the
    minimum below which a figure is insufficient, the smallest its rules ask (of the
    replay's figures and of the repeat suite's: a policy may ask fewer samples than the
    defaults)."""
    def least(rules, default: int) -> int:
        return min((r.min_samples for r in rules if r.min_samples > 0), default=default)

    replay = [r for r in policy.rules if r.name not in DETERMINISM_FIGURES]
    repeats = [r for r in policy.rules if r.name in DETERMINISM_FIGURES]
    return MetricsConfig(target_rer=policy.target_rer, tokenizer=run.tokenizer,
                         process_spread=policy.process_spread,
                         min_samples=least(replay, MetricsConfig.min_samples),
                         min_determinism_prompts=least(repeats,
                                                       MetricsConfig.min_determinism_prompts))


def evaluate_run(run: Run, policy: Policy, config: MetricsConfig | None = None) -> GateResult:
    """The verdict on a loaded run; `config` (default: `metrics_config(policy, run)`) is how
    its figures are computed."""
    config = config if config is not None else metrics_config(policy, run)
    return evaluate_figures(run, policy, run_figures(run, config))


def run_figures(run: Run, config: MetricsConfig) -> list:
    """Every figure of `run` as the gate and `layergate metrics` compute them."""
    determinism = run.determinism.results if run.determinism is not None else run.repeated()
    # The traffic's recorded responses only feed termination_accuracy_recorded, which no
    # policy gates; termination_accuracy is judged against the baseline the candidate ran
    # beside (a recording from another server scored even an A/A run 0.9 on 20 saas-mix
    # requests). So the gate sees the same figures as `layergate metrics`.
    offsets = run.schedule.offsets if run.schedule else None
    traffic = run.path / TRAFFIC
    # a multi-turn conversation is the bootstrap's unit (its turns move together)
    try:
        clusters = conversations(traffic) if traffic.is_file() else None
        positions = turn_positions(traffic) if clusters else None
        # the accuracy figures hold each arm's output to the reference its record carries
        references = read_references(traffic) if traffic.is_file() else None
        # held here only when read again below: compute_figures lets them go once aligned
        unpaired = run.manifest.imported.get("pairing") == UNPAIRED
        columns = _taken(run) if unpaired else None
        figures = compute_figures(columns if unpaired else _taken(run), run.scrapes,
                                  determinism=determinism,
                                  config=config, offsets=offsets,
                                  max_in_flight=run.manifest.in_flight_limit,
                                  clusters=clusters, references=references,
                                  verdicts=read_verdicts(run.path) if references else None,
                                  positions=positions)
    except ValueError as exc:  # two rows for one (request, arm), a malformed response...
        raise RunDirError(f"{run.path}: cannot compute figures from its results: {exc}") from exc
    if unpaired:  # imported runs of other prompts
        arms = [str(a) for a in dict.fromkeys(columns.arm.tolist())]
        scenarios = sorted({str(s) for s in columns.scenario.tolist()})
        figures = with_unpaired(figures, unpaired_figures(columns, arms, config, scenarios))
    return figures


def _taken(run: Run) -> ResultColumns:
    """The run's columns, the run letting go of its own reference: compute_figures drops
    them once aligned, so a million rows are not held twice while the figures are made."""
    columns = run.columns_with_recorded()
    run.release_columns()
    return columns


def evaluate_figures(run: Run, policy: Policy, figures: list) -> GateResult:
    """`policy` applied to figures already computed from `run` (so a caller that shows
    them judges exactly what it shows)."""
    sub = run.determinism.manifest.to_json() if run.determinism is not None else None
    shown, sampled_from = run.shown()
    result = apply_policy(policy, figures, run.manifest.to_json(), run.tallies, run.path, sub,
                          shown=shown, schedule=run.send_lag)
    return replace(result, shown_sampled_from=sampled_from)
