"""Choosing the calibrated settings from the sweeps, and saying plainly what was found."""

from __future__ import annotations

from collections.abc import Sequence

from layergate.reference_engine.calibration.sweep import SpecCell, SweepCell
from layergate.reference_engine.skip_policies.decider import Condition, Rule
from layergate.reference_engine.skip_policies.rules import SpeculativeDraft


def choose_dynamic(cells: Sequence[SweepCell], ranking: Sequence[int],
                   target: float) -> tuple[tuple[Rule, ...], SweepCell | None, str]:
    ok = [c for c in cells if c.consistency >= target and c.mean_layers_skipped > 0]
    if not ok:
        return (), None, (f"dynamic: no threshold cell skips anything with exact-match "
                          f"consistency >= {target}: the rule table is empty (skip nothing)")
    best = max(ok, key=lambda c: (c.mean_layers_skipped, c.consistency, c.feature == "always"))
    when = () if best.feature == "always" else (Condition(best.feature, best.op, best.threshold),)
    rule = Rule(f"skip{best.k}-{best.feature}{best.op}q{best.quantile:g}", when,
                tuple(sorted(ranking[:best.k])))
    return (rule,), best, (f"dynamic: rule {rule.name} fires on {best.skip_rate:.0%} of the "
                           f"calibration prompts, skips {best.k} layers there, exact match "
                           f"{best.consistency:.0%}")


def choose_static(matches: dict[int, list[bool]], ranking: Sequence[int],
                  target: float) -> tuple[tuple[int, ...], float, str]:
    rates = {k: sum(v) / len(v) for k, v in matches.items()}
    ok = [k for k, r in rates.items() if r >= target]
    if not ok:
        worst = ", ".join(f"k={k}: {r:.0%}" for k, r in sorted(rates.items()))
        return (), 1.0, (f"static: removing even the least influential layer breaks exact "
                         f"match below {target} ({worst}); the static set is empty")
    k = max(ok)
    return tuple(sorted(ranking[:k])), rates[k], (
        f"static: {k} least influential layers removed, exact match {rates[k]:.0%}")


def choose_speculative(cells: Sequence[SpecCell]) -> tuple[SpeculativeDraft, SpecCell, str]:
    if not cells:
        raise ValueError("no speculative sweep cells to choose from")
    best = max(cells, key=lambda c: c.speedup_vs_full)
    draft = SpeculativeDraft(
        skip=tuple(int(x) for x in best.skip.split()), exit_after=best.exit_after,
        head_tokens=best.head_tokens, gamma=best.gamma)
    verdict = ("beats full" if best.speedup_vs_full > 1.0 else
               "NO setting beats full decoding; this is the least costly one")
    return draft, best, (f"speculative: draft {best.draft} gamma={best.gamma}: acceptance "
                         f"{best.acceptance:.2f}, {best.tokens_per_full_pass:.2f} tokens per "
                         f"full-depth pass, predicted {best.speedup_vs_full:.2f}x of full "
                         f"decode speed ({verdict})")

