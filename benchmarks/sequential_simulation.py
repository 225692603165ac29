"""How many requests does the sequential gate need, and does it keep its error rate under
monitoring after every request? Simulated runs judged by the real `decide` (and, for the
comparison, the real fixed gate on the first 48 requests), under the shipped policies.

Each simulated run is a shadow replay of `--budget` requests to baseline (A), baseline2
(A') and candidate (B), as `ArmResult` rows in send order: outputs of 8 to 32 tokens (a
32-token cap, as the demo's), per-token latency log-normal per request, A' and B paired
with A by a per-request log-ratio noise (sd 0.08), and every arm (A, A' and B) its own
process: a log speed offset for the whole run of SD tau, the prior 0.02 (one process running
a percent faster than another, as measured on real engines), or off the model with
`--world` (benchmarks/worlds.py: tau twice or half the prior, t3 per-request noise). Both
gates judge with the policies' process_spread (0.02), so their timing intervals carry the
between-process term. `--coverage` counts, over A/A streams of the whole budget, how often
each timing rule's anytime interval (intersected over every look, so at the end is ever)
excluded the truth (0 for RER and a latency excess over the floor). The
scenarios, their parameters from docs/VALIDITY.md (the real runs):

  aa        B = A' = full depth: 2 % of requests diverge (stray batch numerics), half of
            those end elsewhere. A false alarm is a `fail` under no-regression.
  static    10 layers skipped: RER 0.30, 95 % of outputs diverge, termination accuracy 0.85.
  slow      +20 % time per token, outputs identical: latency_ratio's excess over the noise
            floor (B/A - A'/A) 0.20 against no-regression's 0.10.
  faster    a lossless 15 % saving (engine-switches): latency ratio 0.85; passes
            no-regression, and fails default (RER 0.15 < the 0.20 target).
  at-1.10   B/A exactly 1.10 and A'/A 1.0, no per-run offset: the excess exactly at
            no-regression's 0.10 tolerance. A `fail` is a false alarm (the threshold counts
            as good); the hardest case for the latency sequence.
  ta-0.925  termination accuracy exactly at no-regression's 0.925: a `fail` is a false alarm.

    .venv/bin/python benchmarks/sequential_simulation.py             # the figures below
    .venv/bin/python benchmarks/sequential_simulation.py --runs 50 --aa-runs 200  # quick
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import beta

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from layergate.exporters.catalogue import OVERALL  # noqa: E402
from layergate.exporters.figures.compute import compute_figures  # noqa: E402
from layergate.exporters.figures.config import MetricsConfig  # noqa: E402
from layergate.exporters.records import ArmResult  # noqa: E402
from layergate.harness.gate import load_policy  # noqa: E402
from layergate.harness.gate.fixed.verdict import apply_policy  # noqa: E402
from layergate.harness.gate.policy import default_policy_dir  # noqa: E402
from layergate.harness.gate.sequential.decision import _context, _prefix, _tracks, decide  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from worlds import WORLDS, World  # noqa: E402

FIXED_N = 48
TIMING = {"rer": 0.0, "rer_decode": 0.0, "latency_ratio": 0.0, "ttft_latency_ratio": 0.0,
          "tpot_latency_ratio": 0.0}  # A/A truth: no saving, no excess over the floor
CAP = 32
ARMS = {"baseline": "sim://a", "baseline2": "sim://a2", "candidate": "sim://b"}


@dataclass(frozen=True)
class Scenario:
    ratio: float = 1.0  # B's time per token / A's
    diverge: float = 0.02  # share of B's outputs differing from A's
    wrong_end: float = 0.5  # of those, the share ending elsewhere (premature)
    floor_diverge: float = 0.02  # the same for A'
    ta: float | None = None  # termination accuracy exactly, instead (outputs diverge there)
    processes: bool = True  # each arm its own process offset (False: the truth is `ratio`)
    policies: tuple[str, ...] = ("no-regression",)
    expect: str = "pass"  # under the first policy


SCENARIOS = {
    "aa": Scenario(),
    "static": Scenario(ratio=0.70, diverge=0.95, wrong_end=0.15 / 0.95, expect="fail",
                       policies=("no-regression", "default")),
    "slow": Scenario(ratio=1.20, expect="fail"),
    "faster": Scenario(ratio=0.85, policies=("no-regression", "default")),
    "at-1.10": Scenario(ratio=1.10, processes=False),
    "ta-0.925": Scenario(ta=0.925),
}


def _row(rid: str, arm: str, ids: list[int], per_token: float, finish: str) -> ArmResult:
    n = len(ids)
    e2e = per_token * n
    return ArmResult(request_id=rid, arm=arm, scenario="sim", ok=True, http_status=200,
                     ttft_s=0.15 * e2e, e2e_s=e2e, output_text=" ".join(f"w{t}" for t in ids),
                     output_tokens=n, prompt_tokens=16, finish_reason=finish, max_tokens=CAP,
                     token_ids=tuple(ids))


def _answer(rng: np.random.Generator, ids: list[int], diverge: bool, wrong_end: bool
            ) -> tuple[list[int], str]:
    """An output beside the baseline's: the same, or differing after a random cut, and
    ending early (beyond the 2-token tolerance) when `wrong_end`."""
    out = list(ids)
    if diverge:
        cut = int(rng.integers(0, len(out)))
        out[cut:] = [t + 1000 for t in out[cut:]]
    if wrong_end:
        out = out[:max(1, len(out) - int(rng.integers(4, 8)))]
        return out, "stop"
    return out, "length" if len(out) == CAP else "stop"


def simulate(sc: Scenario, n: int, rng: np.random.Generator, world: World = WORLDS["prior"]
             ) -> list[ArmResult]:
    rows: list[ArmResult] = []
    tau = world.tau if sc.processes else 0.0
    u_a, u_a2, u_b = rng.normal(0, tau, 3) if tau else (0.0, 0.0, 0.0)
    noise = world.noise(rng, 0.08, (n, 2))
    for i in range(n):
        rid = f"r{i:05d}"
        length = int(rng.integers(8, CAP + 1))
        ids = [int(t) for t in rng.integers(0, 999, length)]
        finish = "length" if length == CAP else "stop"
        t = float(rng.lognormal(np.log(0.05), 0.3))
        rows.append(_row(rid, "baseline", ids, t * float(np.exp(u_a)), finish))
        f_div = rng.random() < sc.floor_diverge
        a2, fin2 = _answer(rng, ids, f_div, f_div and rng.random() < 0.5)
        rows.append(_row(rid, "baseline2", a2, t * float(np.exp(u_a2 + noise[i, 0])), fin2))
        if sc.ta is not None:
            wrong = rng.random() > sc.ta
            b, fin = _answer(rng, ids, wrong, wrong)
        else:
            div = rng.random() < sc.diverge
            b, fin = _answer(rng, ids, div, div and rng.random() < sc.wrong_end)
        per = t * sc.ratio * float(np.exp(u_b + noise[i, 1]))
        rows.append(_row(rid, "candidate", b, per, fin))
    return rows


def aa_exclusions(world: World, runs: int, budget: int = 400, seed: int = 0,
                  policies: tuple[str, ...] = ("no-regression", "tight")) -> dict[str, int]:
    """A/A streams of `budget` requests in `world`: per policy and timing rule (no-regression
    gates the latency excess, tight RER), how many streams' anytime interval ever excluded
    the truth (the sequential gate's own tracks)."""
    loaded = [load_policy(default_policy_dir() / f"{p}.yaml") for p in policies]
    rng = np.random.default_rng([seed, 0xAA, int(world.tau_scale * 100), len(world.tails)])
    counts: dict[str, int] = {}
    for _ in range(runs):
        rows = simulate(SCENARIOS["aa"], budget, rng, world)
        prefix = _prefix(rows, budget)
        for policy in loaded:
            ctx = _context(prefix, policy, MetricsConfig.confidence)
            for tr in _tracks(policy, ctx):
                if tr.rule.name not in TIMING or tr.low is None or tr.scenario != OVERALL:
                    continue
                truth, key = TIMING[tr.rule.name], f"{policy.name}: {tr.rule.name}"
                counts[key] = counts.get(key, 0) + int(
                    bool(tr.low[-1] > truth or tr.high[-1] < truth))
    return counts


def fixed_verdict(rows: list[ArmResult], policy) -> str:
    first = {f"r{i:05d}" for i in range(FIXED_N)}
    rows = [r for r in rows if r.request_id in first]
    figures = compute_figures(rows, config=MetricsConfig(
        target_rer=policy.target_rer, process_spread=policy.process_spread, min_samples=20))
    manifest = {"id": "sim", "status": "complete", "arms": ARMS}
    return apply_policy(policy, figures, manifest, rows).verdict


def peeking_fails(rows: list[ArmResult], name: str, start: int = 20) -> bool:
    """What not to do: a fixed-sample 95 % CI (normal approximation) recomputed after every
    request from `start` on, failing the run the first time it lies wholly on the bad side
    (only for the at-threshold scenarios' figure)."""
    by = {(r.request_id, r.arm): r for r in rows}
    ids = sorted({r.request_id for r in rows})
    if name == "at-1.10":
        x = np.array([np.log((by[i, "candidate"].e2e_s / by[i, "candidate"].output_tokens)
                             / (by[i, "baseline"].e2e_s / by[i, "baseline"].output_tokens))
                      for i in ids])
        threshold, bad_low = np.log(1.10), True
    else:
        x = np.array([float(by[i, "candidate"].output_tokens
                            >= by[i, "baseline"].output_tokens - 2) for i in ids])
        threshold, bad_low = 0.925, False
    n = np.arange(1, x.size + 1)
    mean = np.cumsum(x) / n
    sd = np.sqrt(np.maximum(np.cumsum(x * x) / n - mean**2, 0) * n / np.maximum(n - 1, 1))
    half = 1.96 * sd / np.sqrt(n)
    bad = (mean - half > threshold) if bad_low else (mean + half < threshold)
    return bool(bad[start - 1:].any())


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    low = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return low, high


def rate(k: int, n: int) -> str:
    if n == 0:
        return "no runs"
    low, high = clopper_pearson(k, n)
    return f"{k}/{n} = {k / n:.3f} [{low:.3f}, {high:.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per scenario")
    parser.add_argument("--aa-runs", type=int, default=2000, help="runs of the A/A scenario")
    parser.add_argument("--fixed-runs", type=int, default=100,
                        help="runs per scenario also judged by the fixed gate at 48")
    parser.add_argument("--budget", type=int, default=400)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--world", choices=WORLDS, default="prior")
    parser.add_argument("--coverage", action="store_true",
                        help="only the A/A interval exclusions (--aa-runs streams) per world")
    args = parser.parse_args()
    world = WORLDS[args.world]
    if args.coverage:
        counts = aa_exclusions(world, args.aa_runs, args.budget, args.seed)
        for name, k in counts.items():
            print(f"{world.name}: {name} interval excludes the truth: {rate(k, args.aa_runs)}")
        return
    policies = {name: load_policy(default_policy_dir() / f"{name}.yaml")
                for name in ("no-regression", "default")}
    print(f"budget {args.budget} requests; fixed gate at {FIXED_N}; "
          "rates with exact (Clopper-Pearson) 95 % intervals")
    for name in args.scenarios.split(","):
        sc = SCENARIOS[name]
        runs = args.aa_runs if name == "aa" else args.runs
        for policy_name in sc.policies:
            policy = policies[policy_name]
            started = time.time()
            verdicts, ns, fixed, peeking = [], [], [], 0
            prng = np.random.default_rng([args.seed, list(SCENARIOS).index(name), 7])
            for k in range(runs):
                rows = simulate(sc, args.budget, prng, world)
                d = decide(rows, policy, args.budget)
                if name in ("at-1.10", "ta-0.925"):
                    peeking += peeking_fails(rows, name)
                verdicts.append(d.verdict)
                ns.append(d.n if d.decided else np.nan)
                if k < args.fixed_runs:
                    fixed.append(fixed_verdict(rows, policy))
            ns_arr = np.array(ns)
            decided = ns_arr[np.isfinite(ns_arr)]
            counts = {v: verdicts.count(v) for v in ("pass", "fail", "inconclusive")}
            fixed_counts = {v: fixed.count(v) for v in ("pass", "fail", "inconclusive")}
            print(f"\n{name} under {policy_name} ({runs} runs, {time.time() - started:.0f} s)")
            print(f"  sequential verdicts: {counts}")
            if decided.size:
                q = np.percentile(decided, [10, 50, 90])
                print(f"  requests to decide: median {q[1]:.0f} (p10 {q[0]:.0f}, p90 "
                      f"{q[2]:.0f}, max {decided.max():.0f}); decided by {FIXED_N}: "
                      f"{rate(int((decided <= FIXED_N).sum()), runs)}")
            print(f"  fixed gate at {FIXED_N} ({len(fixed)} runs): {fixed_counts}")
            if policy_name == "no-regression" and name in ("aa", "faster", "at-1.10",
                                                           "ta-0.925"):
                print(f"  false alarms (sequential fail): {rate(counts['fail'], runs)}")
                print(f"  false alarms (fixed at {FIXED_N}): "
                      f"{rate(fixed_counts['fail'], len(fixed))}")
            if name in ("at-1.10", "ta-0.925"):
                print("  false alarms of a fixed-sample 95 % CI looked at after every "
                      f"request from 20: {rate(peeking, runs)}")


if __name__ == "__main__":
    main()
