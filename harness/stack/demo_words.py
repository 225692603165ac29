"""The demo's verdict in plain words: what the candidate saved, what it changed, and, when
skipping does not pay on this model, why — read from the gate's own figures."""

from __future__ import annotations

from pathlib import Path

from layergate.exporters import bundled
from layergate.exporters.catalogue import CANDIDATE, EXACT_MATCH, FULL_DEPTH, RER, RER_THEORETICAL
from layergate.exporters.figures import OVERALL, Figure
from layergate.harness.gate import GateResult
from layergate.harness.report.wording import saturation
from layergate.harness.stack.demo_config import CANDIDATES, rules_of

SKIPPING = tuple(name for name, c in CANDIDATES.items() if c.skip_policy != FULL_DEPTH)


def calibration_notes(candidate: str, path: Path | None = None) -> list[str]:
    """What calibration said about this skip policy (e.g. that no setting keeps outputs),
    from the rules file it serves with (default: the demo's, `rules_of`)."""
    path = path if path is not None else rules_of(candidate)
    if candidate not in SKIPPING or path is None or not path.is_file():
        return []
    notes = bundled.read_rules(path).get("notes", [])
    return [f"Calibration ({path.name}): {n}" for n in notes if n.startswith(f"{candidate}:")]


def _figure(result: GateResult, name: str, arm: str = CANDIDATE) -> Figure | None:
    for f in result.figures:
        if f.name == name and f.arm == arm and f.scenario == OVERALL and f.value is not None:
            return f
    return None


def _ci(f: Figure) -> str:
    if f.ci_low is None or f.ci_high is None:
        return ""
    return f" (95 % CI {f.ci_low:+.1%} to {f.ci_high:+.1%})"


def _caveat(f: Figure) -> str:
    return "" if f.status == "ok" else f" ({f.status}: {f.reason})"


def plain_words(result: GateResult, candidate: str) -> list[str]:
    lines: list[str] = []
    rer, theo = _figure(result, RER), _figure(result, RER_THEORETICAL)
    exact = _figure(result, EXACT_MATCH)
    target = result.policy.target_rer
    if theo is not None and theo.value >= 0:
        lines.append(f"The candidate skipped {theo.value:.1%} of the layer compute "
                     "(theoretical saving).")
    elif theo is not None:
        lines.append(f"The candidate computed {-theo.value:.1%} more layer work than full "
                     f"depth (theoretical saving {theo.value:+.1%}: drafts and their "
                     "verification cost more than they save).")
    if rer is not None:
        way = "lower" if rer.value >= 0 else "higher"
        lines.append(f"Its time per output token was {abs(rer.value):.1%} {way} than the "
                     f"baseline's: RER {rer.value:+.1%}{_ci(rer)}; the release target is "
                     f"RER >= {target:.0%}.{_caveat(rer)}")
        if theo is not None and theo.value > 0:
            lines.append(f"Realised {rer.value / theo.value:.0%} of the theoretical saving.")
    if exact is not None:
        floor = "" if exact.noise_floor is None else (
            f"; two full-depth baselines agree on {exact.noise_floor:.0%} (the noise floor)")
        lines.append(f"Its outputs were token-identical to the baseline on {exact.value:.0%} "
                     f"of requests{floor}.{_caveat(exact)}")
    lines += _why(rer, theo, exact, target, candidate in SKIPPING)
    queued = saturation(result)
    if queued:  # the latency verdicts are inconclusive: say why before anything else
        lines.insert(0, queued)
    return lines + calibration_notes(candidate)


def _why(rer: Figure | None, theo: Figure | None, exact: Figure | None,
         target: float, skipping: bool) -> list[str]:
    if rer is None:
        return ["RER could not be computed, so the benefit is unknown: no release on faith."]
    if rer.value >= target:
        return []
    why = [f"Skipping does not pay here: RER {rer.value:+.1%} is below the {target:.0%} target."]
    if theo is not None and theo.value > 0 and rer.value < 0.5 * theo.value:
        why.append("Less than half of the skipped compute turned into time: on a 135M model "
                   "the LM head, the embedding, the policy and the batching overheads weigh "
                   "about as much as the layers skipped.")
    if theo is not None and theo.value == 0 and skipping:
        why.append("The candidate skipped no layer compute at all: its calibrated settings "
                   "skip nothing, because no setting kept outputs consistent with full depth "
                   "on this 135M model; what remains of RER is noise.")
    elif theo is not None and theo.value == 0:
        why.append("The candidate skips no layers; any gain comes from the engine switches "
                   "(prefix cache, padding) or is noise.")
    if exact is not None and exact.noise_floor is not None \
            and exact.value < exact.noise_floor - 0.05:
        why.append("And it changes outputs well beyond the noise floor: a 30-layer, 135M "
                   "model has little depth redundancy to give away.")
    return why
