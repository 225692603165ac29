"""`layergate metrics`'s report of a run (a `RunView`): its figures as terminal tables (run
wide, per scenario, and what each arm's answers carried) and as JSON."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.catalogue import (
    BLEU,
    ERROR_RATE,
    EXACT_MATCH,
    LATENCY_RATIO,
    RER,
    RER_THEORETICAL,
    TERMINATION_ACCURACY,
)
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.figures.answer_tally import answer_summary, describe
from layergate.harness.gate import RunView
from layergate.harness.report.fit import Fit

# the figures of the per-scenario table
KEY_FIGURES = (RER, RER_THEORETICAL, TERMINATION_ACCURACY, EXACT_MATCH, BLEU, LATENCY_RATIO,
               ERROR_RATE)


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    if unit == "s":
        return f"{value * 1000:.1f} ms" if abs(value) < 1 else f"{value:.3f} s"
    if unit == "bytes":
        return f"{value:,.0f} B"
    return f"{value:.4g}"


def _interval(f: Figure) -> str:
    """A missing end is unbounded, as the gate judges it."""
    low = "−∞" if f.ci_low is None else _fmt(f.ci_low, f.unit)
    high = "∞" if f.ci_high is None else _fmt(f.ci_high, f.unit)
    return f"[{low}, {high}]"


def _row(f: Figure) -> list[str]:
    ci = _interval(f) if f.ci_low is not None or f.ci_high is not None else ""
    excess = f.detail.get("excess")
    floor = _fmt(f.noise_floor, f.unit) if f.noise_floor is not None else ""
    if excess is not None:
        floor += f" (Δ {excess:+.4g})"
    status = {"ok": "ok", "insufficient": "[yellow]insufficient[/]",
              "not_computable": "[red]not computable[/]"}[f.status]
    if f.reason:
        status += f" [dim]{f.reason}[/]"
    if "stage" in f.detail:
        status += f" [dim]stage {f.detail['stage']}[/]"
    if f.detail.get("p_value") is not None:
        status += f" [dim]p={f.detail['p_value']:.2g}[/]"
    return [f.name, f.arm, _fmt(f.value, f.unit), ci, floor, str(f.n), status]


def print_figures(view: RunView, console: Console | None = None) -> None:
    """The tables on stdout (or `console`), and the verdict when a policy judged them."""
    console = console or Console()
    run, figures = view.run, view.figures
    title = f"run {run.manifest.id} ({run.manifest.kind}, {run.manifest.status})"
    table = Table("figure", "arm", "value", "95% CI", "noise floor (excess)", "n", "status",
                  title=title, title_justify="left")
    for f in figures:
        if f.scenario == OVERALL:
            table.add_row(*_row(f))
    console.print(Fit(table, keys=2))
    scenarios = sorted({f.scenario for f in figures} - {OVERALL})
    if scenarios:
        per = Table("figure", "arm", *scenarios, title="per scenario (value [CI])",
                    title_justify="left")
        index = {(f.name, f.arm, f.scenario): f for f in figures}
        for name in KEY_FIGURES:
            for arm in sorted({f.arm for f in figures if f.name == name}):
                cells = []
                for s in scenarios:
                    f = index.get((name, arm, s))
                    cells.append("—" if f is None or f.value is None else
                                 f"{_fmt(f.value, f.unit)} {_interval(f)}")
                per.add_row(name, arm, *cells)
        console.print(Fit(per, keys=2))
    answers = Table("arm", "token counts from", "quirks (answers)",
                    title="what each arm's answers carried", title_justify="left")
    for arm, seen in answer_summary(run.tallies).items():
        answers.add_row(arm, describe(seen["tokens_from"]), describe(seen["quirks"]))
    console.print(Fit(answers))
    if view.verdict is not None:
        console.print(f"gate verdict under the policy: [bold]{view.verdict}[/]")


def figures_json(view: RunView) -> dict:
    """The run, the verdict (None without a policy) and every figure with its unit."""
    run = view.run
    return {"run": {"id": run.manifest.id, "kind": run.manifest.kind,
                    "status": run.manifest.status, "arms": run.manifest.arms,
                    "counts": run.manifest.counts, "answers": answer_summary(run.tallies)},
            "verdict": view.verdict,
            "figures": [{**asdict(f), "unit": f.unit} for f in view.figures]}


def write_figures_json(view: RunView, path: Path) -> None:
    """`figures_json` to `path`; an OSError when it cannot be written."""
    write_json_atomic(path, figures_json(view), default=float)
