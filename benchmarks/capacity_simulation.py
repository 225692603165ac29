"""Do the capacity-ratio intervals cover? Simulated sweeps on ideal slot servers, real
ladder and judge code.

Each arm is a slot server (an M/D/c queue, first come first served: c slots, a service
time per request, Poisson arrivals), its process a constant log capacity factor
u ~ N(0, sd^2) (`--process-sd`, default `--tau`; applied as a time scale on the load it
sees, so its capacity is exactly exp(u) times its design's). A sweep is R replicates: each
the real ladder (`harness.capacity.ladder.next_step`, `harness.capacity.sweep.step_size`)
from a fresh seed, every step a fresh Poisson schedule starting on idle servers (the
sweep's idle check), judged by the real `exporters.figures.capacity` (attainment of a TTFT SLO).
The replicates share the sweep's processes (the same servers), and the interval is
`layergate.exporters.figures.capacity_replicates.replicated_ratio` with the between-process
term `--tau`; with `--restart` every replicate draws processes of its own (`capacity
--restart`) and the interval is `restarted_ratio` (signed-rank, no process term), as
`replicates.json` then gives it.
Beside it: the single sweep's own bootstrap interval (its first replicate), which is what
`layergate capacity` gave before.

Truths (candidate / baseline capacity):
  aa     1.0: identical 4-slot servers, 0.8 s +- 10 % service-time jitter per request
  policy 1.2: the candidate's design carries exactly 1.2x the load (a policy threshold:
         a pass of capacity_ratio >= 1.2 is a false pass)
  slots  1.643: 6 slots against 4, 0.8 s a request (the truth computed here by a long
         simulation of both queues)

    .venv/bin/python benchmarks/capacity_simulation.py --sweeps 400 --replicates 8
    .venv/bin/python benchmarks/capacity_simulation.py --sweeps 400 --restart
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
from layergate.exporters.figures.capacity_replicates import (  # noqa: E402
    replicated_ratio,
    restarted_ratio,
)
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


def split(steps: list[StepArm]) -> bool:
    """Whether the arms first failed at different loads: their ladders parted, so their
    capacities come from different brackets (sharing one, their errors mostly cancel)."""
    first = {a: min((s.load for s in steps if s.arm == a and not s.passes(TARGET, 0.01)),
                    default=None) for a in (BASELINE, CANDIDATE)}
    return first[BASELINE] != first[CANDIDATE]


def processes(arms: dict[str, Arm], sd: float, rng: np.random.Generator) -> dict[str, Arm]:
    """The arms' servers with a process each: a log capacity factor drawn N(0, sd^2)."""
    u = rng.normal(0, sd, len(arms))
    return {a: Arm(arm.slots, arm.scale * math.exp(u[i]), arm.jitter)
            for i, (a, arm) in enumerate(arms.items())}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=400)
    parser.add_argument("--replicates", type=int, default=8)
    parser.add_argument("--tau", type=float, default=0.02,
                        help="the interval's between-process term (capacity --process-spread)")
    parser.add_argument("--process-sd", type=float, default=None,
                        help="SD of the simulated processes' log capacity (default: --tau)")
    parser.add_argument("--restart", action="store_true",
                        help="fresh processes for every replicate (capacity --restart): the "
                             "interval without the process term")
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
    return parser.parse_args(argv)


DESIGNS = {"aa": ({BASELINE: Arm(4, jitter=0.1), CANDIDATE: Arm(4, jitter=0.1)}, 1.0),
           "policy": ({BASELINE: Arm(4), CANDIDATE: Arm(4, scale=1.2)}, 1.2),
           "slots": ({BASELINE: Arm(4), CANDIDATE: Arm(6)}, None)}


def sweep_config(args: argparse.Namespace) -> CapacityConfig:
    return CapacityConfig(out=Path("unused"), arms={BASELINE: "http://127.0.0.1:1",
                                                    CANDIDATE: "http://127.0.0.1:2"},
                          slo=f"ttft:{WAIT_S}s", traffic=Path("unused"), start=1.0,
                          factor=2.0, bisections=args.bisections, warmup=args.warmup,
                          min_duration=args.duration, min_requests=args.requests,
                          knee_steps=args.knee_steps)


def truth_counts(label: str, args: argparse.Namespace) -> dict:
    """`args.sweeps` sweeps of truth `label`: how many intervals across replicates covered
    the truth, had their lower end above it (a false pass at it) or their upper end below,
    and how often the first replicate's own interval covered; with the errors, widths and
    replicates asked for. What main prints and `make validity` compares with the doc."""
    config = sweep_config(args)
    arms, truth = DESIGNS[label]
    sd = args.tau if args.process_sd is None else args.process_sd
    tau = 0.0 if args.restart else args.tau
    if truth is None:
        truth = true_capacity(arms[CANDIDATE]) / true_capacity(arms[BASELINE])
    rng = np.random.default_rng([args.seed, len(label)])
    covered = below = above = single = single_n = none = 0
    widths, needed, errors, deviations = [], [], [], []
    own: dict[bool, list[float]] = {False: [], True: []}  # by parted: log r - its truth
    for _ in range(args.sweeps):
        procs = processes(arms, sd, rng)
        ratios, first = [], None
        for _r in range(args.replicates):
            if args.restart:
                procs = processes(arms, sd, rng)
            steps = ladder(procs, config, rng)
            first = first if first is not None else steps
            r = ratio_of(steps)
            if r is not None:
                ratios.append(r)
                # the ratio of these processes: the design's times their gap
                gap = (procs[CANDIDATE].scale / arms[CANDIDATE].scale) / (
                    procs[BASELINE].scale / arms[BASELINE].scale)
                own[split(steps)].append(math.log(r / (truth * gap)))
        if len(ratios) < (6 if args.restart else 2):
            none += 1
            continue
        got = restarted_ratio(ratios) if args.restart else replicated_ratio(ratios, tau)
        logs = np.log(ratios)
        deviations += list((logs - logs.mean()) * math.sqrt(len(logs) / (len(logs) - 1)))
        covered += got.low <= truth <= got.high
        below += got.low > truth  # the lower end above the truth: a false pass at it
        above += got.high < truth
        widths.append(got.half_width_log)
        errors.append(math.log(got.value / truth))
        needed.append(got.replicates_for(args.target_half_width))
        fig = next(f for f in cap.figures(first, cap.SweepRule(
            resamples=args.resamples, seed=int(rng.integers(1 << 30))), "req/s")
            if f.name == CAPACITY_RATIO and f.arm == CANDIDATE)
        if fig.ci_low is not None and fig.ci_high is not None:
            single_n += 1
            single += fig.ci_low <= truth <= fig.ci_high
    return {"truth": truth, "done": args.sweeps - none, "none": none, "covered": covered,
            "below": below, "above": above, "single": single, "single_n": single_n,
            "widths": widths, "needed": needed, "errors": errors, "deviations": deviations,
            "own": own, "sd": sd, "tau": tau}


def main() -> None:
    args = parse_args()
    sd = args.tau if args.process_sd is None else args.process_sd
    tau = 0.0 if args.restart else args.tau
    print(f"{args.sweeps} sweeps x {args.replicates} replicates per truth; processes' log "
          f"capacity SD {sd}, "
          + ("restarted for every replicate (no process term)" if args.restart else
             f"shared by the replicates (the interval's tau {tau})")
          + f"; steps >= {args.requests} requests / "
          f"{args.duration:g} s after a {args.warmup:g} s warm-up; {args.bisections} "
          f"bisections, bisection steps x{args.knee_steps:g}")
    for label in args.truths.split(","):
        began = time.time()
        c = truth_counts(label, args)
        truth, done, none = c["truth"], c["done"], c["none"]
        covered, below, above = c["covered"], c["below"], c["above"]
        widths, needed, errors, own = c["widths"], c["needed"], c["errors"], c["own"]
        single, single_n, deviations = c["single"], c["single_n"], c["deviations"]
        known = [n for n in needed if n is not None]
        print(f"\n{label}: true ratio {truth:.4f} ({time.time() - began:.0f} s; {none} "
              f"sweeps without enough replicate ratios)")
        method = "signed-rank" if args.restart else f"t, process term tau {tau:g}"
        print(f"  replicated interval ({method}): coverage "
              f"{share(covered, done)}; lower end above "
              f"the truth (false pass at it) {share(below, done)}; upper end below "
              f"{share(above, done)}")
        print(f"  log error across sweeps: mean {np.mean(errors):+.4f}, SD "
              f"{np.std(errors):.4f}; the processes alone give SD "
              f"{math.sqrt(2 / (args.replicates if args.restart else 1)) * sd:.4f}")
        dev = np.asarray(deviations)
        together, apart = len(own[False]), len(own[True])
        print(f"  replicates' log ratios about their sweep's mean: SD {dev.std():.4f}, "
              f"kurtosis {np.mean(dev ** 4) / np.mean(dev ** 2) ** 2:.1f} (normal: 3); the "
              f"arms first failed at different loads in {apart / (together + apart):.1%} "
              f"of ladders; a ladder's log error against its processes' ratio: SD "
              + ", ".join(f"{np.std(own[k]):.4f} {what}" for k, what in
                          ((False, "stepping together"), (True, "parted")) if own[k]))
        print(f"  mean log half-width {np.mean(widths):.4f}; replicates for a log "
              f"half-width of {args.target_half_width:g}: median "
              f"{int(np.median(known)) if known else 'n/a'} "
              f"({len(needed) - len(known)} sweeps: not reachable, the process term alone wider)")
        if single_n:
            print(f"  one sweep's own bootstrap interval: coverage {share(single, single_n)}")


if __name__ == "__main__":
    main()
