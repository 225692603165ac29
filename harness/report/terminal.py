"""The coloured terminal summary: verdict, why, rollout, and a table worst-first."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from layergate.exporters.catalogue import FAIL, INCONCLUSIVE, PASS
from layergate.harness.gate import INFO, SKIPPED, Check, GateResult
from layergate.harness.report import wording
from layergate.harness.report.fit import Fit

STYLES = {PASS: "green", FAIL: "bold red", INCONCLUSIVE: "yellow", SKIPPED: "dim", INFO: "dim"}
LEGEND = ("· = cannot change the verdict (not critical, or a scenario row not gated); "
          "judged = the CI compared with the threshold (the excess over the noise floor where "
          "the policy subtracts it)")
VERDICT_STYLES = {PASS: "bold white on green", FAIL: "bold white on red",
                  INCONCLUSIVE: "bold black on yellow"}


def print_summary(result: GateResult, console: Console | None = None,
                  show_info: bool = False, candidate: str | None = None) -> None:
    """Verdict, reasons and rollout, then the policy's checks worst first; the figures it
    does not gate are left to --json / --html unless `show_info`. `candidate` names the
    candidate judged, in a run of several."""
    console = console or Console()
    console.print(header(result, candidate))
    console.print(Fit(_table("Run-wide", result.overall, show_info), keys=2))
    for scenario, checks in result.scenarios.items():
        gated = [c for c in checks if c.status != INFO]
        if gated:
            title = f"Scenario {scenario}" + ("" if result.policy.gate_scenarios
                                              else " (reported, not gating)")
            console.print(Fit(_table(title, gated, show_info=False), keys=2))
    console.print(LEGEND, style="dim")


def header(result: GateResult, candidate: str | None = None) -> Panel:
    """The verdict, its reasons, the rollout and the request counts, in a box."""
    verdict = wording.VERDICT_WORDS[result.verdict]
    lines = [f"[{VERDICT_STYLES[result.verdict]}] {verdict} [/] "
             f"run [bold]{result.run_id}[/], policy [bold]{result.policy.name}[/], "
             f"exit code {result.exit_code}"]
    lines += [f"  • {reason}" for reason in result.reasons]
    if wording.saturation(result):
        lines.append(f"[bold yellow]{wording.saturation(result)}[/]")
    r = result.rollout
    lines.append(f"Rollout: [bold]{r.label}[/] — {r.reason}")
    counts = ", ".join(f"{arm} {c['ok']} ok / {c['error']} err"
                       for arm, c in result.request_counts().items())
    lines.append(f"Requests: {counts}")
    title = "layergate gate" if candidate is None else f"layergate gate: candidate {candidate}"
    return Panel("\n".join(lines), title=title, expand=False)


def _table(title: str, checks: list[Check], show_info: bool) -> Table:
    table = Table(title=title, title_justify="left", caption_justify="left")
    for name in ("metric", "status", "value", "judged", "noise", "threshold", "n"):
        table.add_column(name, justify="right" if name in ("value", "n") else "left",
                         no_wrap=name in ("status", "value", "n", "threshold"),
                         overflow="fold", min_width=16 if name == "metric" else None)
    notes = []
    for c in checks:
        if c.status == INFO and not show_info:
            continue
        style = STYLES[c.status]
        name = wording.label(c) + ("" if c.gating or c.status == INFO else " ·")
        if c.status in (SKIPPED, INCONCLUSIVE) and c.compared is None:
            notes.append(f"{wording.label(c)}: {c.reason}")
        table.add_row(name, f"[{style}]{c.status}[/]", wording.num(c.value),
                      wording.ci(c.compared_low, c.compared_high), wording.num(c.noise_floor),
                      f"{c.direction} {wording.num(c.threshold)}" if c.direction else "—",
                      str(c.n or ""), style="dim" if c.status == INFO else None)
    table.caption = "\n".join(notes)
    return table
