"""What the gate decided, with everything the reports need to show why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters.catalogue import exit_code
from layergate.exporters.figures import OVERALL, Figure
from layergate.exporters.figures.answer_tally import Tally
from layergate.exporters.figures.schedule_lag import ScheduleLag
from layergate.exporters.records import ArmResult
from layergate.harness.gate.checks import Check
from layergate.harness.gate.fixed.recommendation import Rollout
from layergate.harness.gate.policy import Policy


@dataclass(frozen=True)
class GateResult:
    verdict: str  # one of layergate.exporters.catalogue.VERDICTS
    reasons: tuple[str, ...]  # the gating checks that decided it, in words
    checks: tuple[Check, ...]
    figures: tuple[Figure, ...]
    policy: Policy
    rollout: Rollout
    run_id: str
    manifest: dict[str, Any] = field(default_factory=dict)
    results: Sequence[ArmResult] = ()  # the run's results, for reports of single requests
    # how many requests `results` were sampled from (Run.shown; None: they are all)
    shown_sampled_from: int | None = None
    # every answer counted (layergate.exporters.figures.answer_tally)
    tallies: tuple[Tally, ...] = ()
    schedule: ScheduleLag | None = None  # the run's send lag (None: not recorded)
    run_dir: Path | None = None

    @property
    def exit_code(self) -> int:
        return int(exit_code(self.verdict))

    @property
    def overall(self) -> list[Check]:
        """Run-wide checks, worst first."""
        return sorted((c for c in self.checks if c.scenario == OVERALL), key=lambda c: c.sort_key)

    @property
    def scenarios(self) -> dict[str, list[Check]]:
        out: dict[str, list[Check]] = {}
        for check in sorted(self.checks, key=lambda c: c.sort_key):
            if check.scenario != OVERALL:
                out.setdefault(check.scenario, []).append(check)
        return dict(sorted(out.items()))

    @property
    def arms(self) -> list[str]:
        arms = self.manifest.get("arms") or {}
        return list(arms) or sorted({t.arm for t in self.tallies})

    def request_counts(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {
            arm: {"ok": 0, "error": 0} for arm in self.arms}
        for t in self.tallies:
            counts.setdefault(t.arm, {"ok": 0, "error": 0})["ok" if t.ok else "error"] += t.count
        return counts
