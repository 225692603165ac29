"""The replay's stop predicate (`replay --until-decided`): after each look, the candidates
whose sequential verdict is decided, and whether the run is; it stops where `decide` on the
stored run finds the decision."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

# the intervals' scipy.special takes a second to import on a busy host: paid when the
# predicate is imported, before sending, not at the first look (a fast run could end
# before that look returns)
import scipy.special  # noqa: F401

from layergate.harness.gate.policy import Policy, load_policy
from layergate.harness.gate.sequential.family import decide_each
from layergate.harness.gate.sequential.send_order import Source
from layergate.harness.stops import Stop


def until_decided(policy_path: str | Path | Policy | None, budget: int | None = None
                  ) -> Callable[[Source], Stop | None]:
    """The replay's stop predicate: given the run so far (its directory, or its rows), a
    `Stop` naming each candidate whose sequential verdict is decided (sending to it stops,
    the others go on) and, once every candidate is decided or the budget is spent, the
    reason to stop the run; None while nothing is decided.
    The policy is read once, here, so a bad one is an error before anything is sent."""
    policy = policy_path if isinstance(policy_path, Policy) else load_policy(policy_path)

    def stop(source: Source) -> Stop | None:
        decisions = decide_each(source, policy, budget)
        decided = {name: f"sequential verdict {d.verdict} after {d.n} requests"
                   for name, d in decisions.items() if d.decided}
        if len(decided) == len(decisions):
            words = ", ".join(f"{d.verdict} after {d.n} requests" if len(decisions) == 1
                              else f"{name} {d.verdict} after {d.n}"
                              for name, d in decisions.items())
            return Stop(run=f"sequential verdict {words}")
        if any(d.exhausted for d in decisions.values()):
            budget_spent = next(d.budget for d in decisions.values() if d.exhausted)
            return Stop(decided, f"budget of {budget_spent} requests spent: inconclusive")
        return Stop(decided) if decided else None

    return stop
