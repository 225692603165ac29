"""How often does `layergate watch` roll back a candidate it should not, and how fast does it
roll back one it should? Simulated windows through the real decision code.

Each rollout feeds `layergate.harness.watch.stages.StageMachine` (the policy and stage plan the CLI
uses) with windows drawn like Prometheus would report them: per arm, the sums and counts of
the E2E / TTFT / TPOT histograms and the request and error counters over one window. Per
window, requests arrive Poisson at `--rate` req/s split by the stage's share; each request's
latencies are log-normal (E2E sigma 0.6, TTFT 0.8, TPOT 0.3); a common load factor
(log-normal, sigma 0.2) multiplies both arms in the same window, as a busy hour would; and
each arm's engine process has its own log speed factor u ~ N(0, tau^2), drawn once per
rollout (the same pods serve every stage), tau the world's (`benchmarks/worlds.py`: the
prior 0.02, 2x, 0.5x, or the prior with Student-t(3) per-request noise).

Experiments:
  aa          identical arms: a rollback is a false rollback
  threshold   the candidate sits exactly at every latency threshold (ratio = 1.10): the
              worst case the guarantee covers; its rollback rate must stay below alpha
  slow        the candidate is --slowdown times slower from the start of the rollout
  turn        the candidate turns --slowdown times slower after --turn windows of stage 1
  errors      the candidate fails --candidate-errors of its requests (baseline 0.2 %)

`--coverage` counts, per experiment, the rollouts in which a latency figure's interval
(any look, any stage) excluded the candidate's true value: the watch's coverage, counted by
exclusions rather than verdicts.

`--table` prints instead how many windows (latency ratios) and requests (error rates) a
decision needs under the shipped policy's error budget, from the formulas alone.

    .venv/bin/python benchmarks/watch_validity.py --rollouts 1000
    .venv/bin/python benchmarks/watch_validity.py --experiments aa --rate 200 --window 60
    .venv/bin/python benchmarks/watch_validity.py --experiments aa --coverage --world tau-2x
    .venv/bin/python benchmarks/watch_validity.py --table
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from worlds import WORLDS, World  # noqa: E402

from layergate.exporters.figures.canary import ArmWindow, Window  # noqa: E402
from layergate.exporters.figures.sequential import rate_difference_sequence, windows_needed  # noqa: E402
from layergate.harness.watch.policy import WatchPolicy, load_watch_policy  # noqa: E402
from layergate.harness.watch.stages import StageMachine, StagePlan, WatchStatus  # noqa: E402

EXPERIMENTS = ("aa", "threshold", "slow", "turn", "errors")
LATENCIES = (("e2e", 2.0, 0.6), ("ttft", 0.2, 0.8), ("tpot", 0.03, 0.3))  # median s, sigma
ROLES = {"e2e", "ttft", "tpot", "requests", "errors"}
BASE_ERRORS = 0.002
TIMED = ("e2e_ratio", "ttft_ratio", "tpot_ratio", "tpot_rer")  # the figures a process moves


@dataclass(frozen=True)
class Arm:
    slow: float = 1.0
    errors: float = BASE_ERRORS


@dataclass
class Result:
    status: WatchStatus
    windows: int  # windows read until the verdict
    after_turn: int | None = None  # windows from the turn to the verdict
    excluded: frozenset[str] = frozenset()  # latency figures whose interval missed the truth


def draw(rng: np.random.Generator, n: int, arm: Arm, load: float, world: World) -> ArmWindow:
    """One arm's window: `load` the window's common factor times the arm's process factor."""
    values: dict[str, float] = {"requests": float(n), "errors": float(rng.binomial(n, arm.errors))}
    ok = n - int(values["errors"])
    for name, median, sigma in LATENCIES:
        x = median * arm.slow * load * np.exp(world.noise(rng, sigma, ok))
        values[f"{name}_sum"], values[f"{name}_count"] = float(x.sum()), float(ok)
    return ArmWindow(values)


def truth(name: str, slow: float) -> float:
    return 1 - slow if name == "tpot_rer" else slow


def missed(status: WatchStatus, slow: float) -> set[str]:
    """The latency figures whose interval, at this look, excludes the candidate's truth."""
    out = set()
    for f in status.figures:
        c = f.check
        if c.name in TIMED and c.ci_low is not None and c.ci_high is not None \
                and not c.ci_low <= truth(c.name, slow) <= c.ci_high:
            out.add(c.name)
    return out


def rollout(rng: np.random.Generator, machine: StageMachine, args, candidate: Arm,
            turn: int | None = None, world: World = WORLDS["prior"]) -> Result:
    k = 0
    u_a, u_b = np.exp(rng.normal(0.0, world.tau, 2))  # each arm's process, for the rollout
    excluded: set[str] = set()
    while True:
        share = machine.status.stage / 100
        load = rng.lognormal(0.0, 0.2)
        arm = candidate if turn is None or k >= turn else Arm()
        n = rng.poisson(args.rate * args.window * np.array([1 - share, share]))
        if min(n) < 1:
            status, _ = machine.step(None, "an arm served no request")
        else:
            w = Window(k * args.window, (k + 1) * args.window,
                       draw(rng, int(n[0]), Arm(), load * u_a, world),
                       draw(rng, int(n[1]), arm, load * u_b, world))
            status, _ = machine.step(w)
            if turn is None:
                excluded |= missed(status, candidate.slow)
        k += 1
        if status.verdict != "pending":
            return Result(status, k, None if turn is None else k - turn, frozenset(excluded))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    from scipy.stats import beta

    a = (1 - level) / 2
    low = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return low, high


def policy_of(args) -> WatchPolicy:
    """The watch policy, with `--prior` as its process_spread when given."""
    policy = load_watch_policy(args.policy)
    return policy if args.prior is None else replace(policy, process_spread=args.prior)


def experiment(name: str, args, rng: np.random.Generator) -> dict:
    policy = policy_of(args)
    world = WORLDS[args.world]
    plan = StagePlan(tuple(args.stages), args.min_windows, args.max_windows, 3)
    candidate, turn = {
        "aa": (Arm(), None), "threshold": (Arm(slow=1.10), None),
        "slow": (Arm(slow=args.slowdown), None), "turn": (Arm(slow=args.slowdown), args.turn),
        "errors": (Arm(errors=args.candidate_errors), None)}[name]
    results = []
    for _ in range(args.rollouts):
        machine = StageMachine(policy, plan, ROLES, "simulated")
        results.append(rollout(rng, machine, args, candidate, turn, world))
    verdicts = Counter(r.status.verdict for r in results)
    fails = [r for r in results if r.status.verdict == "fail"]
    out = {"experiment": name, "rollouts": len(results), "verdicts": dict(verdicts),
           "alpha": policy.alpha, "figure_alpha": machine.alpha, "margin": machine.margin,
           "excluded": {f: sum(f in r.excluded for r in results) for f in TIMED},
           "excluded_any": sum(bool(r.excluded) for r in results)}
    k = verdicts.get("fail", 0)
    out["rollback_rate"] = k / len(results)
    out["rollback_ci95"] = clopper_pearson(k, len(results))
    if fails:
        w = np.array([r.after_turn if r.after_turn is not None else r.windows for r in fails])
        out["windows_to_rollback"] = {"median": float(np.median(w)),
                                      "p90": float(np.percentile(w, 90)), "max": int(w.max())}
        out["stage_of_rollback"] = dict(Counter(f"{r.status.stage:g}" for r in fails))
        out["deciding"] = dict(Counter(r.status.reasons[0].split(":")[0] for r in fails))
    passes = [r.windows for r in results if r.status.verdict == "pass"]
    if passes:
        out["windows_to_promote_median"] = float(np.median(passes))
    return out


def table(args) -> None:
    """Windows / requests a decision needs, for the shipped policy on the layergate engine."""
    policy = policy_of(args)
    plan = StagePlan(tuple(args.stages), args.min_windows, args.max_windows, 3)
    roles = ROLES | {"cache_queries", "cache_hits", "layers_executed", "layers_skipped"}
    m = StageMachine(policy, plan, roles, "layergate")
    alpha = m.alpha / 2  # the whole-stage interval's share
    print(f"policy {policy.name}: alpha {policy.alpha:g} over {len(plan.analysed)} stages x "
          f"{len(policy.gating)} critical figures -> {m.alpha:.2g} per stage and figure, "
          f"{alpha:.2g} for the whole-stage interval; tightest at {m.n_opt} windows; the "
          f"between-process margin (process_spread {policy.process_spread:g}) {m.margin:.3f} "
          "in log ratio")
    sds = (0.02, 0.05, 0.1, 0.2, 0.4)
    print("windows until a latency ratio is decided against the 1.10 threshold, by the sd of a "
          "window's log ratio:")
    print(f"{'true ratio':>12} " + " ".join(f"{'sd ' + format(s, 'g'):>8}" for s in sds))
    for ratio in (0.9, 1.0, 1.25, 1.5, 2.0):
        gap = abs(math.log(ratio) - math.log(1.10)) - m.margin  # what the sequence must clear
        cells = [windows_needed(gap, s, alpha, m.n_opt, limit=999) if gap > 0 else "never"
                 for s in sds]
        print(f"{ratio:>12g} " + " ".join(f"{'>999' if c is None else c:>8}" for c in cells))
    print("candidate requests until the error-rate difference is decided against +0.01, at "
          "the 5 % stage (the baseline serving 19 times as many):")
    for base, cand in ((0.0, 0.0), (0.002, 0.002), (0.002, 0.05), (0.01, 0.05)):
        n = 50
        while n < 10**6:
            b = rate_difference_sequence(cand * n, n, base * 19 * n, 19 * n, m.alpha)
            if b.high <= 0.01 or b.low > 0.01:
                break
            n = int(n * 1.1) + 1
        verdict = "good" if b.high <= 0.01 else "bad"
        print(f"  baseline {base:.1%}, candidate {cand:.1%}: ~{n} ({verdict})")


def aa_exclusions(world: World, rollouts: int, seed: int = 0, rate: float = 200.0,
                  prior: float | None = None) -> dict:
    """Identical arms in `world` through the shipped policy and stage plan (`rate` req/s,
    60 s windows): the rollouts whose latency intervals excluded the truth ("any" and per
    figure), and the verdicts. What `make validity` and the suite regenerate."""
    args = parser().parse_args(["--rollouts", str(rollouts), "--rate", str(rate),
                                "--world", world.name]
                               + ([] if prior is None else ["--prior", str(prior)]))
    rng = np.random.default_rng([seed, 0xA7C4, int(world.tau_scale * 100), len(world.tails)])
    out = experiment("aa", args, rng)
    return {"any": out["excluded_any"], **out["excluded"], **{
        f"verdict {v}": k for v, k in out["verdicts"].items()}}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experiments", nargs="+", choices=EXPERIMENTS, default=list(EXPERIMENTS))
    p.add_argument("--rollouts", type=int, default=500)
    p.add_argument("--rate", type=float, default=50.0, help="requests / s, both arms together")
    p.add_argument("--window", type=float, default=60.0, help="seconds")
    p.add_argument("--stages", type=float, nargs="+", default=[1, 5, 25, 50, 100])
    p.add_argument("--min-windows", type=int, default=5)
    p.add_argument("--max-windows", type=int, default=30)
    p.add_argument("--slowdown", type=float, default=1.5)
    p.add_argument("--turn", type=int, default=8, help="windows of stage 1 before the turn")
    p.add_argument("--candidate-errors", type=float, default=0.05)
    p.add_argument("--policy", type=Path, default=None)
    p.add_argument("--world", choices=WORLDS, default="prior",
                   help="the true process spread and per-request noise (benchmarks/worlds.py)")
    p.add_argument("--prior", type=float, default=None,
                   help="the process_spread the watch assumes (default: the policy's)")
    p.add_argument("--coverage", action="store_true",
                   help="also print how many rollouts' latency intervals excluded the truth")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--table", action="store_true", help="print what a decision needs, and stop")
    return p


def main() -> None:
    args = parser().parse_args()
    if args.table:
        table(args)
        return
    rng = np.random.default_rng(args.seed)
    print(f"rate {args.rate:g} req/s, window {args.window:g} s, stages {args.stages}, "
          f"windows per stage {args.min_windows}..{args.max_windows}, {args.rollouts} rollouts "
          f"per experiment, world {args.world} (process tau {WORLDS[args.world].tau:g})",
          flush=True)
    for name in args.experiments:
        t0 = time.monotonic()
        out = experiment(name, args, rng)
        low, high = out["rollback_ci95"]
        line = (f"{name:10s} verdicts {out['verdicts']}  rollback rate {out['rollback_rate']:.4f}"
                f" (95 % CI {low:.4f}-{high:.4f}; alpha {out['alpha']:g}, per stage and figure "
                f"{out['figure_alpha']:.2g})")
        if "windows_to_rollback" in out:
            w = out["windows_to_rollback"]
            line += (f"\n{'':10s} windows to rollback{' after the turn' if name == 'turn' else ''}:"
                     f" median {w['median']:g}, p90 {w['p90']:g}, max {w['max']}"
                     f" (= {w['median'] * args.window:g} s / {w['p90'] * args.window:g} s);"
                     f" stage {out['stage_of_rollback']}; decided by {out['deciding']}")
        if args.coverage:
            ex = ", ".join(f"{f} {k}" for f, k in out["excluded"].items())
            line += (f"\n{'':10s} interval excluded the truth (any look, any stage): any "
                     f"{out['excluded_any']}/{out['rollouts']} ({ex}); margin "
                     f"{out['margin']:.4f} in log ratio")
        if "windows_to_promote_median" in out:
            line += f"\n{'':10s} windows to promote: median {out['windows_to_promote_median']:g}"
        print(line + f"  [{time.monotonic() - t0:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
