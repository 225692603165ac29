"""The gate's check of schedule fidelity: a replay whose sends lagged their intended times
by more than the policy's `max_send_lag_p99_s` (at p99) measured the load tool, not the
arms, so it is inconclusive, never a pass or a fail. Without a bound it is only shown."""

from __future__ import annotations

from layergate.exporters.catalogue import EVERY_ARM, INCONCLUSIVE, PASS, SCHEDULE_LAG
from layergate.exporters.figures import OVERALL
from layergate.exporters.figures.schedule_lag import ScheduleLag
from layergate.harness.gate.checks import INFO, SKIPPED, Check
from layergate.harness.gate.policy import Policy

_BEHIND = ("the load tool, not the arms, was the limit: replay a slower schedule "
           "(import-trace --time-scale, replay --speed or --rate) or with more --processes")


def schedule_check(policy: Policy, lag: ScheduleLag | None) -> Check:
    """The check of the run's send lag (`layergate.exporters.figures.schedule_lag`; None: not
    recorded)."""
    bound = policy.max_send_lag_p99_s
    base = dict(name=SCHEDULE_LAG, scenario=OVERALL, arm=EVERY_ARM, critical=True,
                threshold=bound, direction="<=", unit="s")
    if lag is None:
        return Check(status=SKIPPED, counts=False, reason="the run recorded no send times "
                     "(written before schedule fidelity was)", **base)
    values = dict(value=lag.p99_s, compared=lag.p99_s, compared_low=lag.p99_s,
                  compared_high=lag.p99_s, n=lag.n)
    if bound is None:
        return Check(status=INFO, counts=False, reason=f"{lag.words()}; the policy sets no "
                     "max_send_lag_p99_s", **base, **values)
    if lag.p99_s <= bound:
        return Check(status=PASS, counts=True, reason=f"{lag.words()}; p99 within "
                     f"{bound:g} s", **base, **values)
    return Check(status=INCONCLUSIVE, counts=True, reason=f"{lag.words()}; p99 over "
                 f"max_send_lag_p99_s {bound:g} s: {_BEHIND}", **base, **values)
