"""The report of a sweep (`capacity-report.json`, also written for a partial sweep): per
arm its capacity and every step it ran, and the catalogued capacity figures."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from layergate.exporters.catalogue import CAPACITY, CAPACITY_RATIO, COMPLETE, ExitCode
from layergate.exporters.figures import Figure
from layergate.exporters.figures import capacity as cap
from layergate.exporters.figures.capacity_step import StepArm
from layergate.harness.capacity.config import CapacityConfig
from layergate.harness.report import wording
from layergate.harness.sweepdir import KIND, SweepState


def sweep_rule(config: CapacityConfig) -> cap.SweepRule:
    return cap.SweepRule(config.slo_attainment, config.max_error_rate, config.resamples,
                         config.seed)


def sweep_figures(state: SweepState, config: CapacityConfig) -> list[Figure]:
    """The sweep's catalogued figures, its ratios' intervals labelled as one sweep's
    (`single_sweep`)."""
    return [single_sweep(f) for f in cap.figures(state.arm_steps(), sweep_rule(config),
                                                 config.unit)]


# a single sweep's ratio interval, wherever it is shown: the label in the figure's detail
SINGLE_SWEEP = "single sweep: sampling noise only"
SINGLE_SWEEP_NOTE = ("that interval is this sweep's sampling noise only (it covers the true "
                     "ratio in 70-77 % of simulated sweeps, not 95 %); for one that covers, "
                     "rerun with --replicates 8 --restart CMD")


def single_sweep(f: Figure) -> Figure:
    """A capacity ratio from one sweep with its interval labelled (detail `interval`,
    `interval_note`): the block bootstrap sees the requests' noise at the steps run, not
    the processes or another arrival schedule (docs/VALIDITY.md, "Capacity at the SLO")."""
    if f.name != CAPACITY_RATIO or f.ci_low is None and f.ci_high is None:
        return f
    return dataclasses.replace(f, detail={**f.detail, "interval": SINGLE_SWEEP,
                                          "interval_note": SINGLE_SWEEP_NOTE})


def off_the_verdict(f: Figure) -> Figure:
    """The figure a verdict sees: a single sweep's ratio is shown with its interval, but
    never judged on it (insufficient: the rule is inconclusive, the reason says why and
    what covers)."""
    if f.detail.get("interval") != SINGLE_SWEEP:
        return f
    return dataclasses.replace(f, status="insufficient", reason=(
        "one sweep's interval, its sampling noise only: no verdict rests on it; rerun with "
        "--replicates 8 --restart CMD"))


def _step_json(r: StepArm, config: CapacityConfig) -> dict[str, Any]:
    return {"load": r.load, "n": r.n, "attainment": r.attainment, "error_rate": r.error_rate,
            "goodput": r.goodput, "saturated": list(r.saturated),
            "passed": r.passes(config.slo_attainment, config.max_error_rate),
            "why": r.why_not(config.slo_attainment, config.max_error_rate), **r.percentiles}


def build_report(state: SweepState, config: CapacityConfig) -> dict[str, Any]:
    figures = sweep_figures(state, config)
    arms: dict[str, Any] = {}
    for arm in config.arms:
        steps = sorted((r for r in state.arm_steps() if r.arm == arm), key=lambda r: r.load)
        c = next((f for f in figures if f.name == CAPACITY and f.arm == arm), None)
        arms[arm] = {"capacity": c.value if c else None,
                     "bound": c.detail["bound"] if c else cap.NONE,
                     "text": c.detail["text"] if c else "no step",
                     "ladder": state.done.get(arm, ""),
                     "steps": [_step_json(r, config) for r in steps]}
    return {"kind": KIND, "status": state.status, "slo": config.parsed_slo.text(),
            "slo_attainment": config.slo_attainment, "load": config.load,
            "unit": config.unit, "sent": state.sent, "seconds": state.seconds,
            "arms": arms, "notes": state.notes, "exit": int(exit_of(state, figures)),
            "figures": [{**asdict(f), "unit": f.unit} for f in figures],
            **({"ratio_interval": SINGLE_SWEEP_NOTE}
               if any(f.detail.get("interval") == SINGLE_SWEEP for f in figures) else {})}


def exit_of(state: SweepState, figures: list[Figure]) -> ExitCode:
    """0: every arm has a capacity; 3: an arm has none (fails the SLO at its lowest step)
    or only a lower bound; 1: the sweep did not finish."""
    if state.status != COMPLETE:
        return ExitCode.FAIL
    bounds = [f.detail.get("bound") for f in figures if f.name == CAPACITY]
    if not bounds or any(b != cap.EXACT for b in bounds):
        return ExitCode.INCONCLUSIVE
    return ExitCode.PASS


def print_sweep(figures: list[Figure], state: SweepState, config: CapacityConfig,
                echo: Callable[..., Any]) -> None:
    """The sweep's outcome, each arm's capacity and each candidate's ratio, in lines for
    `echo` (notes to its stderr: `echo(line, err=True)`)."""
    echo(f"{state.status}: {config.out} (SLO {config.parsed_slo.text()}, attainment "
         f">= {config.slo_attainment:g}; {len(state.steps)} steps, {state.sent} requests)")
    for f in figures:
        if f.name == CAPACITY:
            ci = wording.ci(f.ci_low, f.ci_high)
            echo(f"capacity {f.arm}: {f.detail['text']}" + (f" {ci}" if ci != "—" else ""))
    for f in figures:
        if f.name == CAPACITY_RATIO:
            value = "n/a" if f.value is None else f"{f.value:.3f}"
            ci = wording.ci(f.ci_low, f.ci_high, ".3f")
            ci = f" {ci}" if ci != "—" else ""
            floor = f", noise floor {f.noise_floor:.3f}" if f.noise_floor is not None else ""
            why = f" ({f.reason})" if f.reason else ""
            echo(f"capacity ratio {f.arm} / baseline: {value}{ci}{floor}{why}")
            if f.detail.get("interval") == SINGLE_SWEEP:  # it cannot see the processes
                echo(f"  {SINGLE_SWEEP_NOTE}")
    for note in state.notes:
        echo(f"note: {note}", err=True)
