"""Why a replay could not go on for a reason outside layergate: each is exit 4
(infrastructure) from `layergate replay`, and the manifest, when there is one, says how
far the run got."""

from __future__ import annotations

from layergate.exporters.errors import InfrastructureError


class ReplayError(InfrastructureError, RuntimeError):
    pass


class ArmsUnreachable(ReplayError):
    """Arms that are not there (the preflight), by name, with why: nothing was sent."""

    def __init__(self, problems: dict[str, str]) -> None:
        self.problems = problems
        lines = "; ".join(f"{arm}: {why}" for arm, why in problems.items())
        super().__init__(f"{len(problems)} arm(s) not there, nothing sent: {lines}")


class ArmDown(ReplayError):
    """The circuit breaker stopped the run: it is interrupted, for `--resume`."""


class WorkersShort(ReplayError):
    """Too few accepted workers joined within `--worker-wait`: the run never started."""
