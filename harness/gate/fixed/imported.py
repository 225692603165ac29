"""What the gate says of a run of imported load-tool results (`layergate import-results`,
the manifest's `imported`), as checks every report shows: each setting the arms differ in
(imported with --allow) as a warning, the settings no tool recorded, and how the arms were
paired. None of them decides the verdict: a mismatch was refused at import unless allowed.
A time ratio judged unpaired says so in its own reason (`unpaired_reason`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from layergate.exporters.catalogue import (
    EVERY_ARM,
    IMPORT_COMPARABLE,
    IMPORT_PAIRING,
    IMPORT_SETTINGS,
    INCONCLUSIVE,
    OVERALL,
    PAIRED,
    UNPAIRED,
)
from layergate.exporters.figures import Figure
from layergate.harness.gate.checks import INFO, Check


def imported_checks(manifest: dict[str, Any]) -> list[Check]:
    section = manifest.get("imported") or {}
    if not section:
        return []
    base = dict(scenario=OVERALL, arm=EVERY_ARM, status=INFO, counts=False)
    # one row (the JSON report keys rows by name): the warnings of arms imported with
    # --allow, then what no tool recorded. Inconclusive when warned, never deciding: whether
    # the arms compare is in doubt and the user chose to go on (and every report, the HTML
    # one too, shows a row that is not only info)
    warnings = [f"warning: {w} (imported with --allow: the figures compare runs made "
                "differently)" for w in section.get("warnings", [])]
    unchecked = _unchecked(section.get("arms", {}))
    said = [*warnings, *([f"not checked, a tool did not record it: {'; '.join(unchecked)}"]
                         if unchecked else [])]
    checks = [Check(name=IMPORT_COMPARABLE, reason="; ".join(said),
                    **{**base, "status": INCONCLUSIVE if warnings else INFO})] if said else []
    tools = ", ".join(sorted({f"{a['tool']} {a.get('version') or ''}".strip()
                              for a in section.get("arms", {}).values()}))
    if section.get("pairing") == PAIRED:
        why = (f"paired by prompt: every arm ({tools}) sent the same prompts; intervals "
               "from the paired bootstrap")
    else:
        why = (f"unpaired: the arms ({tools}) did not send prompts known to be the same; "
               "the time ratios are of each arm's geometric mean, their intervals from "
               "resampling each arm on its own, and figures that need pairs are "
               "insufficient")
    checks.append(Check(name=IMPORT_PAIRING, reason=why, **base))
    return checks


def _unchecked(arms: dict[str, Any]) -> list[str]:
    """Each setting some arm's tool did not record, with those arms."""
    out = []
    for setting in IMPORT_SETTINGS:
        missing = [a for a, v in arms.items() if v.get("settings", {}).get(setting) is None]
        if missing and len(arms) > 1:
            out.append(f"{setting} (not recorded for {', '.join(missing)})")
    return out


def unpaired_reason(check: Check, figure: Figure | None) -> Check:
    """`check`, its reason saying so when its figure was computed unpaired."""
    if figure is None or figure.detail.get("pairing") != UNPAIRED:
        return check
    return replace(check, reason=f"{check.reason} ({UNPAIRED}: each arm resampled on its "
                   "own, the arms' prompts not known to be the same)")
