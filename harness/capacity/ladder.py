"""The ladder: which load each arm is stepped at next, from its steps so far.

Geometric until the arm first fails (each load the last passing one times `factor`), then
bisection of its bracket [last pass, first fail] in log load until the bracket is narrower
than `factor ** (1 / 2 ** bisections)` (users: or one user wide; the midpoint rounded
down). An arm that failed never steps above its first failure again; one that failed its
first step is done (no capacity). The next step is the lowest proposed load, sent to every
arm proposing it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from layergate.harness.capacity.config import USERS, CapacityConfig

DONE_NONE, DONE_BRACKETED, DONE_AT_MAX = "no step passed", "bracketed", "passed --max-load"


@dataclass(frozen=True)
class Proposal:
    load: float | None  # None: the arm is done
    why: str = ""


def _rounded(load: float, users: bool) -> float:
    return float(round(load)) if users else float(f"{load:.4g}")


def propose(outcomes: Sequence[tuple[float, bool]], config: CapacityConfig) -> Proposal:
    """The next load of one arm from its (load, passed) steps."""
    users = config.load == USERS
    if not outcomes:
        return Proposal(_rounded(config.start, users))
    passed = [load for load, ok in outcomes if ok]
    failed = [load for load, ok in outcomes if not ok]
    if not failed:
        top = max(passed)
        if config.max_load is not None and top >= config.max_load:
            return Proposal(None, DONE_AT_MAX)
        nxt = _rounded(top * config.factor, users)
        if users and nxt <= top:
            nxt = top + 1
        if config.max_load is not None:
            nxt = min(nxt, config.max_load)
        return Proposal(nxt)
    fail = min(failed)
    below = [load for load in passed if load < fail]
    if not below:
        return Proposal(None, DONE_NONE)
    low = max(below)
    if fail / low <= config.factor ** (1 / 2 ** config.bisections) * (1 + 1e-9) or \
            (users and fail - low <= 1):
        return Proposal(None, DONE_BRACKETED)
    mid = float((low + fail) // 2) if users else _rounded(math.sqrt(low * fail), users)
    if not low < mid < fail:
        return Proposal(None, DONE_BRACKETED)
    return Proposal(mid)


def next_step(outcomes: Mapping[str, Sequence[tuple[float, bool]]],
              config: CapacityConfig) -> tuple[float | None, tuple[str, ...], dict[str, str]]:
    """(the next load, the arms to send it to, arm -> why done for the arms that are)."""
    proposals = {arm: propose(steps, config) for arm, steps in outcomes.items()}
    done = {arm: p.why for arm, p in proposals.items() if p.load is None}
    loads = [p.load for p in proposals.values() if p.load is not None]
    if not loads:
        return None, (), done
    low = min(loads)
    return low, tuple(arm for arm, p in proposals.items() if p.load == low), done
