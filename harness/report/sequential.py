"""`gate --sequential` in the terminal: each candidate's decision in send order, its
figures and why, and the run's verdict under `--require` when there are several."""

from __future__ import annotations

from layergate.exporters.catalogue import OVERALL
from layergate.exporters.figures.saturation import LOWER_THE_RATE
from layergate.harness.gate import SequentialDecision, SequentialFamily


def sequential_lines(family: SequentialFamily) -> list[str]:
    one = family.only is not None
    out = [line for name, decision in family.decisions.items()
           for line in decision_lines(decision, None if one else name)]
    if not one:
        out.append(f"run verdict (--require {family.require}): {family.verdict.upper()}")
    return out


def decision_lines(decision: SequentialDecision, name: str | None) -> list[str]:
    """One candidate's decision; `name` names it in a run of several."""
    budget_text = f" of a budget of {decision.budget}" if decision.budget else ""
    when = (f"decided after {decision.n} requests" if decision.decided
            else f"undecided after {decision.n} requests")
    who = "" if name is None else f" of candidate {name}"
    out = [f"sequential verdict{who}: {decision.verdict.upper()} ({when}{budget_text}; "
           f"{decision.available} judged in send order; confidence sequences at "
           f"{decision.confidence:.4g})"]
    for f in decision.figures:
        flag = "" if f.counts else " (not gating)"
        where = "" if f.scenario == OVERALL else f" [{f.scenario}]"
        out.append(f"  {f.state:<10} {f.name}{where}{flag}: {f.reason}")
    for arm, signals in decision.saturated.items():
        out.append(f"  saturated  ttft_growth ({arm}): {'; '.join(signals)}; "
                   f"{LOWER_THE_RATE}")
    out += [f"reason: {reason}" for reason in decision.reasons]
    return out
