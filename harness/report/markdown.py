"""`--markdown`: a CI job summary (GitHub's $GITHUB_STEP_SUMMARY renders it as is)."""

from __future__ import annotations

from pathlib import Path

from layergate.harness.gate import INFO, Check, GateResult
from layergate.harness.report import wording


def render_markdown(result: GateResult, candidate: str | None = None) -> str:
    """The summary; `candidate` names the candidate judged, in a run of several."""
    r = result.rollout
    who = "" if candidate is None else f" candidate `{candidate}`"
    out = [f"## {wording.ICONS[result.verdict]} layergate gate{who}: "
           f"**{wording.VERDICT_WORDS[result.verdict]}**", "",
           f"Run `{result.run_id}` · policy `{result.policy.name}` · exit code "
           f"{result.exit_code} · rollout recommendation: **{r.label}**", ""]
    if wording.saturation(result):
        out += [f"**{escape(wording.saturation(result))}**", ""]
    if result.reasons:
        out += ["**Why:**", ""] + [f"- {escape(reason)}" for reason in result.reasons] + [""]
    judged = [c for c in result.overall if c.status != INFO]
    info = [c for c in result.overall if c.status == INFO]
    out += [f"_Rollout:_ {escape(r.reason)}", "", _counts(result), "",
            "### Run-wide", "", *_table(judged)]
    if info:  # folded: a CI summary should lead with what decided the verdict
        out += ["", f"<details><summary>{len(info)} more figures, reported and not gated"
                    "</summary>", "", *_table(info), "", "</details>"]
    for scenario, checks in result.scenarios.items():
        gated = [c for c in checks if c.status != INFO]
        if gated:
            note = "" if result.policy.gate_scenarios else " (reported, not gating)"
            out += ["", f"### Scenario `{scenario}`{note}", "", *_table(gated)]
    return "\n".join(out) + "\n"


def write_markdown(result: GateResult, path: str | Path) -> Path:
    path = Path(path)
    path.write_text(render_markdown(result))
    return path


def _counts(result: GateResult) -> str:
    cells = ", ".join(f"{arm}: {c['ok']} ok, {c['error']} errors"
                      for arm, c in result.request_counts().items())
    return f"Requests — {cells}"


def _table(checks: list[Check]) -> list[str]:
    rows = ["| | metric | value | CI | noise floor | compared | threshold | n | why |",
            "|---|---|---:|---|---:|---|---|---:|---|"]
    for c in checks:
        critical = "" if c.gating or c.status == INFO else " *(not critical)*"
        compared = wording.ci(c.compared_low, c.compared_high) if c.subtract_noise_floor else ""
        rows.append(f"| {wording.ICONS[c.status]} | {wording.label(c)}{critical} | "
                    f"{wording.num(c.value)} | {wording.ci(c.ci_low, c.ci_high)} | "
                    f"{wording.num(c.noise_floor)} | {compared} | "
                    f"{escape(wording.threshold(c))} | {c.n or ''} | {escape(c.reason)} |")
    return rows


def escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
