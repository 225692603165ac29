"""The reports of a run with several candidates: the run's verdict under `--require`, the
multiplicity adjustment, the leaderboard, and each candidate's own report (the
one-candidate writers, applied to each)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.catalogue import CANDIDATE, MULTIPLICITY
from layergate.harness.gate import FamilyResult
from layergate.harness.report import leaderboard, wording
from layergate.harness.report.fit import Fit
from layergate.harness.report.json_report import to_dict
from layergate.harness.report.junit import add_suite, write_tree
from layergate.harness.report.markdown import escape, render_markdown
from layergate.harness.report.terminal import STYLES, VERDICT_STYLES, header, print_summary


def family_dict(family: FamilyResult) -> dict[str, Any]:
    best = family.recommended
    return {
        "verdict": family.verdict,
        "exit_code": family.exit_code,
        "require": family.require,
        "recommended": best.name if best is not None else None,
        "reasons": family.reasons(),
        "multiplicity": {
            "method": family.multiplicity, "alpha": family.alpha,
            "description": MULTIPLICITY[family.multiplicity],
            "confidence": {c.name: c.confidence for c in family.candidates}},
        "family_wise_confidence": {c.name: c.family_wise_confidence
                                   for c in family.candidates},
        "not_worse_than_best": list(family.not_worse_than_best),
        "recommended_interval": family.recommended_interval,
        "differences": [{"first": d.first, "second": d.second, "value": d.value,
                         "ci_low": d.low, "ci_high": d.high, "confidence": d.confidence}
                        for d in family.differences],
        "leaderboard": leaderboard.to_json(family),
        "candidates": {c.name: {**to_dict(c.result), "confidence": c.confidence}
                       for c in family.candidates},
    }


def write_family_json(family: FamilyResult, path: str | Path) -> Path:
    return write_json_atomic(path, family_dict(family))


def write_family_junit(family: FamilyResult, path: str | Path) -> Path:
    """One <testsuite> per candidate."""
    suites = ET.Element("testsuites", name="layergate gate")
    for c in family.candidates:
        run_id = c.result.run_id
        add_suite(suites, c.result, f"layergate gate {run_id} candidate {c.name}",
                  classname=f"layergate.gate.{c.name}")
    return write_tree(ET.ElementTree(suites), path)


def render_family_markdown(family: FamilyResult) -> str:
    board = leaderboard.rows(family)
    shown = leaderboard.columns(board)
    out = [f"## {wording.ICONS[family.verdict]} layergate gate: "
           f"**{wording.VERDICT_WORDS[family.verdict]}** ({len(family.candidates)} "
           f"candidates)", "", *(f"- {escape(r)}" for r in family.reasons()),
           f"- multiplicity: {family.multiplicity} ({escape(MULTIPLICITY[family.multiplicity])})"
           f", family-wise alpha {family.alpha:.3g}", "", "### Leaderboard", "",
           "| candidate | verdict | confidence | " + " | ".join(shown) +
           " | Pareto front | |", "|---|---|---:|" + "---|" * len(shown) + "---|---|"]
    for r in board:
        cells = " | ".join(leaderboard.cell_text(r, n) for n in shown)
        out.append(f"| `{r.name}` | {wording.ICONS[r.verdict]} {r.verdict} | "
                   f"{r.confidence:.4g} | {cells} | {'yes' if r.pareto else ''} | "
                   f"{'**recommended**' if r.recommended else ''} |")
    out += ["", *(f"- {escape(n)}" for n in leaderboard.notes(board))]
    for c in family.candidates:
        text = render_markdown(c.result, candidate=c.name)
        out.append("\n".join("#" + line if line.startswith("##") else line
                             for line in text.splitlines()))
    return "\n".join(out) + "\n"


def write_family_markdown(family: FamilyResult, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(render_family_markdown(family))
    return path


def leaderboard_table(family: FamilyResult) -> Table:
    board = leaderboard.rows(family)
    shown = leaderboard.columns(board)
    table = Table(title=f"Leaderboard (saving against {leaderboard.against(board)}, "
                        "intervals at each candidate's adjusted confidence)",
                  title_justify="left")
    for name in (CANDIDATE, "verdict", *shown, "front", ""):
        table.add_column(name, no_wrap=name in ("verdict", CANDIDATE))
    for r in board:
        table.add_row(r.name, f"[{STYLES[r.verdict]}]{r.verdict}[/]",
                      *(leaderboard.cell_text(r, n) for n in shown),
                      "yes" if r.pareto else "", "[bold]recommended[/]" if r.recommended
                      else "")
    return table


def print_verdict(family: FamilyResult, console: Console | None = None) -> None:
    """The gate's terminal report: a family of one as its candidate's summary."""
    if family.only is not None:
        print_summary(family.only, console)
    else:
        print_family(family, console)


def print_family(family: FamilyResult, console: Console | None = None) -> None:
    """Each candidate's summary, then the leaderboard and the run's verdict."""
    console = console or Console()
    for c in family.candidates:
        print_summary(c.result, console, candidate=c.name)
    print_brief(family, console)


def print_brief(family: FamilyResult, console: Console | None = None) -> None:
    """The verdict without the candidates' tables of checks (the reports hold them): a
    family of one as its candidate's header, several as the leaderboard and the run's
    verdict."""
    console = console or Console()
    if family.only is not None:
        console.print(header(family.only))
        return
    console.print(Fit(leaderboard_table(family), keys=2, packed=False))
    for note in leaderboard.notes(leaderboard.rows(family)):
        console.print(f"note: {note}", highlight=False)
    lines = [f"[{VERDICT_STYLES[family.verdict]}] {wording.VERDICT_WORDS[family.verdict]} [/]"
             f" exit code {family.exit_code}; multiplicity {family.multiplicity} "
             f"(family-wise alpha {family.alpha:.3g})"]
    for c in family.candidates:
        why = "; ".join(c.result.reasons[:3]) or "every gated figure cleared its threshold"
        lines.append(f"  • {c.name}: {c.verdict} at confidence {c.confidence:.4g} — {why}")
    lines += [f"  {r}" for r in family.reasons()]
    console.print(Panel("\n".join(lines), title="layergate gate: the candidates",
                        expand=False))


def render_family_html(family: FamilyResult) -> str:
    """The leaderboard (table and plot), then each candidate's report."""
    import base64
    from html import escape as html

    from layergate.harness.report.html import page, render_body
    from layergate.harness.report.html_plots import saving_against_consistency

    board = leaderboard.rows(family)
    shown = leaderboard.columns(board)
    png = base64.b64encode(saving_against_consistency(board)).decode("ascii")
    head = "".join(f"<th>{html(n)}</th>" for n in (CANDIDATE, "verdict", "confidence",
                                                   *shown, "Pareto front", ""))
    body = "".join(
        f"<tr><td><a href='#candidate-{html(r.name)}'>{html(r.name)}</a></td>"
        f"<td><span class='s s-{r.verdict}'>{r.verdict}</span></td>"
        f"<td class=num>{r.confidence:.4g}</td>"
        + "".join(f"<td class=nw>{html(leaderboard.cell_text(r, n))}</td>"
                  for n in shown)
        + f"<td>{'yes' if r.pareto else ''}</td>"
          f"<td>{'<b>recommended</b>' if r.recommended else ''}</td></tr>" for r in board)
    reasons = "".join(f"<li>{html(r)}</li>" for r in family.reasons())
    top = (f"<div class=card><span class='verdict v-{family.verdict}'>"
           f"{wording.VERDICT_WORDS[family.verdict]}</span><h1 style='display:inline'>"
           f"layergate gate: {len(family.candidates)} candidates</h1>"
           f"<p class=meta>exit code {family.exit_code} · multiplicity "
           f"<b>{html(family.multiplicity)}</b> ({html(MULTIPLICITY[family.multiplicity])}),"
           f" family-wise alpha {family.alpha:.3g}</p><ul class=reasons>{reasons}</ul></div>"
           f"<h2 id=leaderboard>Leaderboard</h2><div class=card><table><tr>{head}</tr>{body}"
           f"</table>{''.join(f'<p class=meta>{html(n)}</p>' for n in leaderboard.notes(board))}"
           f"</div><div class=plots><figure id=plot-leaderboard><img alt='saving "
           f"against consistency' src='data:image/png;base64,{png}'><figcaption><b>Saving "
           f"against consistency.</b> One point per candidate with its intervals, coloured "
           f"by verdict; the dashed line is the Pareto front. The saving is the RER, or "
           f"(square markers) 1 − 1/capacity ratio from the candidate's capacity sweep."
           f"</figcaption></figure></div>")
    sections = "".join(f"<section id='candidate-{html(c.name)}'>"
                       f"{render_body(c.result, c.name)}</section>" for c in family.candidates)
    return page(f"layergate gate: {family.verdict}", top + sections)


def write_family_html(family: FamilyResult, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(render_family_html(family), encoding="utf-8")
    return path
