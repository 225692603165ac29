"""Do the capacity-ratio intervals cover? Simulated sweeps on ideal slot servers, real
ladder and judge code.

Each arm is a slot server (an M/D/c queue, first come first served: c slots, a service
time per request, Poisson arrivals), its process a constant log capacity factor
u ~ N(0, tau^2) for the whole sweep (applied as a time scale on the load it sees, so its
capacity is exactly exp(u) times its design's). A sweep is R replicates: each the real
ladder (`harness.capacity.ladder.next_step`, `harness.capacity.sweep.step_size`) from a
fresh seed, every step a fresh Poisson schedule starting on idle servers (the sweep's idle
check), judged by the real `exporters.figures.capacity` (attainment of a TTFT SLO); the replicates
share the sweep's processes (the same servers). The interval is
`layergate.exporters.figures.capacity_replicates.replicated_ratio` (log ratio across replicates
with the between-process term). Beside it: the single sweep's own bootstrap interval (its first
replicate), which is what `layergate capacity` gave before.

Truths (candidate / baseline capacity):
  aa     1.0: identical 4-slot servers, 0.8 s +- 10 % service-time jitter per request
  policy 1.2: the candidate's design carries exactly 1.2x the load (a policy threshold:
         a pass of capacity_ratio >= 1.2 is a false pass)
  slots  1.643: 6 slots against 4, 0.8 s a request (the truth computed here by a long
         simulation of both queues)

    .venv/bin/python benchmarks/capacity_simulation.py --sweeps 400 --replicates 8
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gate_simulation import share  # noqa: E402
from layergate.exporters.catalogue import BASELINE, CANDIDATE, CAPACITY_RATIO  # noqa: E402
from layergate.exporters.figures import capacity as cap  # noqa: E402
from layergate.exporters.figures.capacity_replicates import replicated_ratio  # noqa: E402
from layergate.exporters.figures.capacity_step import StepArm  # noqa: E402
from layergate.harness.capacity.config import CapacityConfig  # noqa: E402
from layergate.harness.capacity.ladder import next_step  # noqa: E402
from layergate.harness.capacity.replicates import dithered  # noqa: E402
from layergate.harness.capacity.sweep import step_size  # noqa: E402
from layergate.harness.sweepdir import Step, SweepState  # noqa: E402

SERVICE_S, WAIT_S = 0.8, 0.8  # a request takes 0.8 s; the SLO lets it wait 0.8 s for a slot
TARGET = 0.95


def waits(arrivals: np.ndarray, slots: int, service: np.ndarray) -> np.ndarray:
    """Each arrival's wait for a slot, vectorised: with equal service times, FCFS gives
    request n the slot request n - c frees (start_n = max(a_n, start_{n-c} + S_{n-c})), so
    each residue class mod c is one Lindley recursion, solved by a running maximum. With
    jittered service it is the same recursion (a slot per residue class), symmetric across
    identical arms."""
    start = np.empty_like(arrivals)
    for lane in range(slots):
        a, s = arrivals[lane::slots], service[lane::slots]
        before = np.concatenate([[0.0], np.cumsum(s[:-1])])  # service ahead in the lane
        start[lane::slots] = before + np.maximum.accumulate(a - before)
    return start - arrivals


class Arm:
    def __init__(self, slots: int, scale: float = 1.0, jitter: float = 0.0) -> None:
        self.slots, self.scale, self.jitter = slots, scale, jitter

    def met(self, arrivals: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        # carrying `scale` times the load: it sees the schedule stretched by that factor
        service = SERVICE_S * np.exp(self.jitter * rng.standard_normal(arrivals.size))
        return waits(arrivals * self.scale, self.slots, service) <= WAIT_S


def true_capacity(arm: Arm, n: int = 400_000, seed: int = 7) -> float:
    """The rate at which TARGET of the requests wait at most WAIT_S, in the steady state
    (bisection on one long schedule, rescaled)."""
    rng = np.random.default_rng(seed)
    unit = np.cumsum(rng.exponential(1.0, n))
    low, high = 1e-3, arm.slots / SERVICE_S * arm.scale
    for _ in range(40):
        mid = (low + high) / 2
        got = arm.met(unit / mid, np.random.default_rng(seed + 1))[n // 10:].mean()
        low, high = (mid, high) if got >= TARGET else (low, mid)
    return low


def ladder(arms: dict[str, Arm], config: CapacityConfig, rng: np.random.Generator
           ) -> list[StepArm]:
    """One replicate: the real ladder from its own dithered start
    (`harness.capacity.replicates.dithered`), each step a fresh schedule on idle servers."""
    config = dataclasses.replace(config, start=dithered(config.start, config.factor,
                                                        int(rng.integers(1 << 30))))
    state, out = SweepState({}), []
    while True:
        outcomes = {a: [(s.load, s.passes(TARGET, config.max_error_rate))
                        for s in out if s.arm == a] for a in arms}
        load, stepping, _ = next_step(outcomes, config)
        if load is None:
            return out
        n = step_size(config, load, state)
        sent = np.cumsum(rng.exponential(1 / load, n)) - rng.exponential(1 / load)
        sent = np.maximum(sent, 0.0)
        measured = sent >= config.warmup
        window = (sent[measured][-1] - sent[measured][0]) * measured.sum() / max(
            measured.sum() - 1, 1)
        step = [StepArm(a, load, tuple(arms[a].met(sent, rng)[measured].tolist()), 0,
                        float(window)) for a in stepping]
        out += step
        state.steps.append(Step(len(state.steps), load, stepping, n, 0.0, tuple(step)))


def ratio_of(steps: list[StepArm]) -> float | None:
    by = {a: cap.capacity([s for s in steps if s.arm == a], TARGET, 0.01)
          for a in (BASELINE, CANDIDATE)}
    if any(c.bound != cap.EXACT for c in by.values()):
        return None
    return by[CANDIDATE].value / by[BASELINE].value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=400)
    parser.add_argument("--replicates", type=int, default=8)
    parser.add_argument("--tau", type=float, default=0.02)
    parser.add_argument("--duration", type=float, default=60.0, help="measured s a step")
    parser.add_argument("--requests", type=int, default=200, help="measured requests a step")
    parser.add_argument("--warmup", type=float, default=60.0)
    parser.add_argument("--bisections", type=int, default=3)
    parser.add_argument("--knee-steps", type=float, default=2.0,
                        help="bisection steps this many times longer (capacity --knee-steps)")
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--target-half-width", type=float, default=0.08,
                        help="log half-width to size replicates for (0.08: about +-8 %%)")
    parser.add_argument("--truths", default="aa,policy,slots")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    config = CapacityConfig(out=Path("unused"), arms={BASELINE: "http://127.0.0.1:1",
                                                      CANDIDATE: "http://127.0.0.1:2"},
                            slo=f"ttft:{WAIT_S}s", traffic=Path("unused"), start=1.0,
                            factor=2.0, bisections=args.bisections, warmup=args.warmup,
                            min_duration=args.duration, min_requests=args.requests,
                            knee_steps=args.knee_steps)
    designs = {"aa": ({BASELINE: Arm(4, jitter=0.1), CANDIDATE: Arm(4, jitter=0.1)}, 1.0),
               "policy": ({BASELINE: Arm(4), CANDIDATE: Arm(4, scale=1.2)}, 1.2),
               "slots": ({BASELINE: Arm(4), CANDIDATE: Arm(6)}, None)}
    print(f"{args.sweeps} sweeps x {args.replicates} replicates per truth; tau {args.tau} "
          f"(log capacity per process); steps >= {args.requests} requests / "
          f"{args.duration:g} s after a {args.warmup:g} s warm-up; {args.bisections} "
          f"bisections, bisection steps x{args.knee_steps:g}")
    for label in args.truths.split(","):
        arms, truth = designs[label]
        if truth is None:
            truth = true_capacity(arms[CANDIDATE]) / true_capacity(arms[BASELINE])
        rng = np.random.default_rng([args.seed, len(label)])
        began = time.time()
        covered = below = above = single = single_n = none = 0
        widths, needed, errors = [], [], []
        for _ in range(args.sweeps):
            u = rng.normal(0, args.tau, 2)
            procs = {a: Arm(arm.slots, arm.scale * math.exp(u[i]), arm.jitter)
                     for i, (a, arm) in enumerate(arms.items())}
            ratios, first = [], None
            for _r in range(args.replicates):
                steps = ladder(procs, config, rng)
                first = first if first is not None else steps
                r = ratio_of(steps)
                if r is not None:
                    ratios.append(r)
            if len(ratios) < 2:
                none += 1
                continue
            got = replicated_ratio(ratios, args.tau)
            covered += got.low <= truth <= got.high
            below += got.low > truth  # the lower end above the truth: a false pass at it
            above += got.high < truth
            widths.append(got.half_width_log)
            errors.append(math.log(got.value / truth))
            needed.append(got.replicates_for(args.target_half_width))
            fig = next(f for f in cap.figures(first, cap.SweepJudge(
                resamples=args.resamples, seed=int(rng.integers(1 << 30))), "req/s")
                if f.name == CAPACITY_RATIO and f.arm == CANDIDATE)
            if fig.ci_low is not None and fig.ci_high is not None:
                single_n += 1
                single += fig.ci_low <= truth <= fig.ci_high
        done = args.sweeps - none
        known = [n for n in needed if n is not None]
        print(f"\n{label}: true ratio {truth:.4f} ({time.time() - began:.0f} s; {none} "
              f"sweeps without 2 replicate ratios)")
        print(f"  replicated interval: coverage {share(covered, done)}; lower end above "
              f"the truth (false pass at it) {share(below, done)}; upper end below "
              f"{share(above, done)}")
        print(f"  log error across sweeps: mean {np.mean(errors):+.4f}, SD "
              f"{np.std(errors):.4f}; the process term alone has SD {math.sqrt(2) * args.tau:.4f}")
        print(f"  mean log half-width {np.mean(widths):.4f}; replicates for a log "
              f"half-width of {args.target_half_width:g}: median "
              f"{int(np.median(known)) if known else 'n/a'} "
              f"({len(needed) - len(known)} sweeps: not reachable, the process term)")
        if single_n:
            print(f"  one sweep's own bootstrap interval: coverage {share(single, single_n)}")


if __name__ == "__main__":
    main()
