"""Between-process variance for paired performance figures (RER, decode RER, the latency
ratios).

The per-request bootstrap resamples requests; it cannot see that one engine process runs
a percent or two faster than another for its whole life, which moves every request of an
arm together. Model: each arm's process has a log speed factor u ~ N(0, τ²), independent
between processes, so a time ratio X/A carries exp(u_X - u_A) on top of what the requests
contribute. Each resample draws its own (u_A, u_A', u_B) (one draw per run, shared by all
figures and scenarios, as the processes are), which widens the interval by the right
amount and keeps B-vs-A and A'-vs-A coupled through u_A for the noise-floor excess.

τ is estimated per figure from the prior (`MetricsConfig.process_spread`, learned from
real A/A runs: docs/METRICS.md) pooled with what the run's own A' shows: the log A'/A ratio
d is one draw of N(0, 2τ² + v), v its bootstrap variance, so (d² - v)/2 estimates τ²;
the prior counts as PRIOR_WEIGHT such observations, and is also the least τ used.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from layergate.exporters.catalogue import ARMS, BASELINE, CANDIDATE

PRIOR_WEIGHT = 4  # the prior τ counts as this many A'/A observations


def process_draws(n_resamples: int, seed: int, candidate: str = CANDIDATE
                  ) -> dict[str, np.ndarray]:
    """One standard-normal process effect per arm and resample; the same for every figure
    of a run with this seed. `candidate`: the candidate's own name in a run of several, so
    each candidate's process gets its own draw (keyed by the role, every candidate shared
    one, and a candidate-vs-candidate comparison cancelled τ)."""
    rng = np.random.default_rng([seed, 0x5EED])
    z = dict(zip(ARMS, rng.standard_normal((len(ARMS), n_resamples)), strict=True))
    if candidate != CANDIDATE:
        key = zlib.crc32(candidate.encode())
        z[CANDIDATE] = np.random.default_rng([seed, 0x5EED, key]).standard_normal(n_resamples)
    return z


def to_ratio(values: np.ndarray | float, timing: str) -> np.ndarray | float:
    return values if timing == "ratio" else 1 - np.asarray(values)


def from_ratio(ratios: np.ndarray, timing: str) -> np.ndarray:
    return ratios if timing == "ratio" else 1 - ratios


def spread(prior: float, floor: float | None, floor_boot: np.ndarray | None,
           timing: str) -> float:
    """τ for one figure: the prior pooled with the run's A'/A evidence (when it has A')."""
    if floor is None or floor_boot is None:
        return prior
    with np.errstate(divide="ignore", invalid="ignore"):
        d = math.log(to_ratio(floor, timing)) if to_ratio(floor, timing) > 0 else math.nan
        logs = np.log(to_ratio(floor_boot, timing))
    logs = logs[np.isfinite(logs)]
    if not math.isfinite(d) or logs.size < 2:
        return prior
    seen = max(0.0, (d * d - float(logs.var())) / 2)
    # the run's own A' can widen the interval, never narrow it below the prior: one A'/A
    # pair is too little evidence that this run's processes happen to agree
    return math.sqrt(max(prior ** 2, (PRIOR_WEIGHT * prior ** 2 + seen) / (PRIOR_WEIGHT + 1)))


def with_process(boot: np.ndarray, timing: str, arm: str, tau: float,
                 draws: dict[str, np.ndarray]) -> np.ndarray:
    """Resampled values of `arm` against the baseline with the process effect added."""
    if tau <= 0:
        return boot
    effect = np.exp(tau * (draws[arm][:boot.shape[-1]] - draws[BASELINE][:boot.shape[-1]]))
    with np.errstate(invalid="ignore", over="ignore"):
        return from_ratio(to_ratio(boot, timing) * effect, timing)
