"""The echo server with N slots (tests/support/echo_server.py --slots) as an M/D/c queue:
Poisson arrivals, a fixed service time, c servers, first come first served. Its capacity
under a TTFT limit is computed here by simulation, the truth a measured sweep is held to."""

from __future__ import annotations

import heapq

import numpy as np


def waits(arrivals: np.ndarray, slots: int, service_s: float) -> np.ndarray:
    """Each arrival's wait for a free slot."""
    free = [0.0] * slots
    out = np.empty(arrivals.size)
    for i, t in enumerate(arrivals):
        start = max(t, heapq.heappop(free))
        out[i] = start - t
        heapq.heappush(free, start + service_s)
    return out


def attainment(rate: float, slots: int, service_s: float, wait_limit_s: float,
               n: int = 20_000, seed: int = 1) -> float:
    """Share of requests that waited at most `wait_limit_s`, in the steady state."""
    arrivals = np.cumsum(np.random.default_rng(seed).exponential(1 / rate, n))
    return float((waits(arrivals, slots, service_s) <= wait_limit_s).mean())


def true_capacity(slots: int, service_s: float, wait_limit_s: float,
                  target: float = 0.95, n: int = 20_000, seed: int = 1) -> float:
    """The highest Poisson rate at which `target` of the requests wait at most the limit,
    on one simulated stream of `n` arrivals (`seed`): one draw, whose Monte Carlo error
    benchmarks/slots_truth.py gives."""
    low, high = 1e-3, slots / service_s  # above c / S the queue grows without bound
    for _ in range(30):
        mid = (low + high) / 2
        ok = attainment(mid, slots, service_s, wait_limit_s, n, seed) >= target
        low, high = (mid, high) if ok else (low, mid)
    return low


def simulated_step(arm: str, load: float, n: int, slots: int, token_s: float, tokens: int,
                   slo, warmup_s: float, seed: int):
    """One step of a capacity sweep (the sweep's own Poisson schedule for `n` requests at
    `load`) on an ideal slot server, judged as the sweep judges: TTFT = the wait for a
    slot + one token."""
    from layergate.exporters.figures.capacity_step import step_arms
    from layergate.exporters.records import ArmResult
    from layergate.harness import scenarios

    sent = np.array(scenarios.poisson_offsets(n, load, seed))
    wait = waits(sent, slots, token_s * tokens)
    rows = [ArmResult(f"c{i:06d}", arm, "s", True, ttft_s=w + token_s,
                      e2e_s=w + token_s * tokens, output_tokens=tokens)
            for i, w in enumerate(wait)]
    sent_at = {f"c{i:06d}": float(t) for i, t in enumerate(sent)}
    return step_arms(rows, sent_at, load, slo, warmup_s, None)[0]
