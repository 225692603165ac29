"""`layergate compare`'s report of a `Comparison` (harness/gate/fixed/compare.py): the two runs
side by side on the terminal, and as JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.catalogue import CANDIDATE
from layergate.harness.gate import Change, Comparison
from layergate.harness.report.fit import Fit


def _n(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.4g}"


def _side(value: float | None, low: float | None, high: float | None) -> str:
    interval = "" if low is None or high is None else f" [{_n(low)}, {_n(high)}]"
    return f"{_n(value)}{interval}"


def print_comparison(c: Comparison, console: Console) -> None:
    """Both runs, whether their traffic is the same, the figure-by-figure table (gated rows
    first) and the regressions."""
    ra, rb = c.run_a, c.run_b
    console.print(f"A: run {ra.run_id}, candidate {c.arm_a} ({ra.verdict})  ·  "
                  f"B: run {rb.run_id}, candidate {c.arm_b} ({rb.verdict})", highlight=False)
    if c.same_traffic:
        console.print(f"same traffic (sha256 {str(c.traffic[0])[:12]}): the candidates' "
                      f"answers changed on {_n(c.outputs_changed)} of {c.paired} paired "
                      "requests", highlight=False)
    else:
        console.print(f"[bold yellow]the traffic differs[/] (sha256 {str(c.traffic[0])[:12]} "
                      f"vs {str(c.traffic[1])[:12]}): the answers are not paired across the "
                      "runs; each run's own paired figures are compared", highlight=False)
    table = Table(title="figure by figure (gated rows first; compared = the excess over the "
                        "noise floor where the policy subtracts it)", title_justify="left")
    for name in ("figure", "rule", "A", "B", "change", "outside both", ""):
        table.add_column(name)
    for ch in sorted(c.changes, key=lambda x: (not x.gated, not x.regression, x.name)):
        mark = "[bold red]regression[/]" if ch.regression else (
            "[yellow]worse[/]" if ch.worse and ch.outside else "")
        table.add_row(ch.name, ch.threshold or "·", _side(ch.a.value, ch.a.low, ch.a.high),
                      _side(ch.b.value, ch.b.low, ch.b.high),
                      "—" if ch.delta is None else f"{ch.delta:+.4g}",
                      "yes" if ch.outside else "", mark)
    console.print(Fit(table))
    words = ", ".join(r.name for r in c.regressions)
    console.print(f"[bold red]REGRESSION[/]: {words}" if words else
                  "no gated figure regressed", highlight=False)


def _change(ch: Change) -> dict[str, Any]:
    def fin(x: float | None) -> float | None:
        return None if x is None or not math.isfinite(x) else x
    return {"name": ch.name, "gated": ch.gated, "rule": ch.threshold or None,
            "a": {"value": fin(ch.a.value), "ci_low": fin(ch.a.low), "ci_high": fin(ch.a.high)},
            "b": {"value": fin(ch.b.value), "ci_low": fin(ch.b.low), "ci_high": fin(ch.b.high)},
            "delta": fin(ch.delta), "outside_both": ch.outside, "worse": ch.worse,
            "regression": ch.regression}


def comparison_json(c: Comparison) -> dict[str, Any]:
    """`compare --json`: both runs, the traffic check, the regressions and every figure."""
    return {"a": {"run": c.run_a.run_id, CANDIDATE: c.arm_a, "verdict": c.run_a.verdict},
            "b": {"run": c.run_b.run_id, CANDIDATE: c.arm_b, "verdict": c.run_b.verdict},
            "same_traffic": c.same_traffic, "traffic_sha256": list(c.traffic),
            "outputs_changed": c.outputs_changed, "paired_requests": c.paired,
            "regressions": [r.name for r in c.regressions],
            "figures": [_change(ch) for ch in c.changes]}


def write_comparison_json(comparison: Comparison, path: Path) -> Path:
    return write_json_atomic(path, comparison_json(comparison))
