"""How often does the gate false-alarm, and how much can it see? Simulated runs, real gate code.

Each simulated run replays N requests through three arms (baseline A, baseline2 A',
candidate B). Request costs (output tokens, unloaded TTFT, time per output token) are
drawn from a real run's baseline; every arm's process gets its own log speed factor
u ~ N(0, tau^2) for the whole run (one engine process runs a percent or two faster than
another), and every request on every arm its own noise e ~ N(0, sigma^2) in log time,
sigma measured from the same real run's A'-vs-A pairs. The candidate's true time ratio is
1 (A/A), 0.85 (`faster`: a true 15 % saving) or 1.20 (`slow`: +20 % latency).

The figures come from the gate's own code (alignment, resampled sums,
layergate.exporters.figures.rer and
layergate.exporters.figures.latency with their intervals) and are judged by the shipped policies'
rules (`default`, `tight`), under each method:

  per-request    the per-request paired bootstrap alone (process_spread 0), latency
                 judged as B/A against an absolute tolerance (the policies before)
  process        + the between-process term (prior process_spread, pooled with A'/A),
                 latency judged as B/A
  process+floor  + latency judged as its excess over the noise floor, B/A - A'/A (as the
                 shipped policies do)

Prints per experiment and method: how often each figure's 95 % CI excludes "no
difference" (A/A: calibrated is <= 5 %), and per policy the share of runs whose RER and
latency checks pass / fail, each with its exact Clopper-Pearson 95 % interval.

    .venv/bin/python benchmarks/gate_simulation.py --runs 2000 --tau 0.02   # committed inputs
    .venv/bin/python benchmarks/gate_simulation.py --sigma 0.097 --world tau-2x
    .venv/bin/python benchmarks/gate_simulation.py --from-run runs/gate-validity-X/aa-00
    .venv/bin/python benchmarks/gate_simulation.py --record-inputs runs/gate-validity-X/aa-00
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from layergate.exporters.figures import (  # noqa: E402
    OVERALL,  # noqa: E402
    latency,
    rer,
)
from layergate.exporters.figures.aligned import align  # noqa: E402
from layergate.exporters.figures.bootstrap import resample_sums  # noqa: E402
from layergate.exporters.figures.config import MetricsConfig  # noqa: E402
from layergate.exporters.records import ArmResult  # noqa: E402
from layergate.harness.gate import check_figure  # noqa: E402
from layergate.harness.gate.policy import default_policy_dir, load_policy  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from worlds import WORLDS, World  # noqa: E402

EXPERIMENTS = {"aa": 1.0, "faster": 0.85, "slow": 1.20}
FIGURES = {"rer": 0.0, "rer_decode": 0.0, "latency_ratio": 1.0, "ttft_latency_ratio": 1.0,
           "tpot_latency_ratio": 1.0}
METHODS = ("per-request", "process", "process+floor")
POLICIES = ("default", "tight")


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import beta

    low = float(beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    high = float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return low, high


def share(k: int, n: int) -> str:
    low, high = clopper_pearson(k, n)
    return f"{k / n:6.1%} [{low:.3f}, {high:.3f}]"


# --- inputs from a real run ---------------------------------------------------------------

def measured_inputs(run_dir: Path) -> dict:
    """Per-request costs of the run's baseline and the per-request noise sigma from its
    A'-vs-A pairs (the first third of the run in send order: before any queue built up)."""
    from layergate.harness.rundir import load_run

    run = load_run(run_dir)
    order = {t.id: t.offset_s for t in run.traffic.records}
    rows = {(r.arm, r.request_id): r for r in run.results if r.ok and r.output_tokens >= 2}
    ids = sorted({rid for arm, rid in rows if arm == "baseline"}, key=order.get)
    ids = [i for i in ids if ("baseline2", i) in rows]
    early = ids[: max(9, len(ids) // 3)]

    def tpot(r: ArmResult) -> float:
        return (r.e2e_s - r.ttft_s) / (r.output_tokens - 1)

    a = [rows[("baseline", i)] for i in early]
    a2 = [rows[("baseline2", i)] for i in early]
    log_tpot = np.log([tpot(y) / tpot(x) for x, y in zip(a, a2, strict=True)])
    log_ttft = np.log([y.ttft_s / x.ttft_s for x, y in zip(a, a2, strict=True)])
    everything = [rows[("baseline", i)] for i in ids]
    return {
        "source": str(run_dir), "requests": len(ids), "early": len(early),
        "tokens": np.array([r.output_tokens for r in everything]),
        "ttft": np.array([r.ttft_s for r in a]),  # unloaded: the first third's
        "tpot": np.array([tpot(r) for r in a]),
        # the pair difference carries two arms' noise
        "sigma_tpot": float(log_tpot.std(ddof=1) / np.sqrt(2)),
        "sigma_ttft": float(log_ttft.std(ddof=1) / np.sqrt(2)),
    }


INPUTS = ROOT / "benchmarks" / "data" / "aa_costs.json"


def committed_inputs(path: Path = INPUTS) -> dict:
    """The per-request costs and noise of a real A/A run, committed (its `recorded` key
    says when and by which command): what the simulation draws from by default."""
    raw = json.loads(path.read_text())
    return {"source": f"{path.relative_to(ROOT)} ({raw['recorded']['date']})",
            "requests": raw["requests"], "early": raw["early"],
            "tokens": np.array(raw["tokens"]), "ttft": np.array(raw["ttft"]),
            "tpot": np.array(raw["tpot"]), "sigma_tpot": raw["sigma_tpot"],
            "sigma_ttft": raw["sigma_ttft"]}


def write_inputs(run_dir: Path, command: str, path: Path = INPUTS) -> None:
    """Commit a run's inputs: what `measured_inputs` reads, rounded, with how it was made."""
    got = measured_inputs(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "recorded": {"date": time.strftime("%Y-%m-%d"), "command": command,
                     "run": got["source"]},
        "requests": got["requests"], "early": got["early"],
        "tokens": [int(x) for x in got["tokens"]],
        "ttft": [round(float(x), 5) for x in got["ttft"]],
        "tpot": [round(float(x), 6) for x in got["tpot"]],
        "sigma_tpot": round(got["sigma_tpot"], 4), "sigma_ttft": round(got["sigma_ttft"], 4),
    }, indent=1) + "\n")


# --- one simulated run ---------------------------------------------------------------------

def simulate(inputs: dict, n: int, tau: float, ratio: float, rng: np.random.Generator,
             world: World = WORLDS["prior"]) -> list[ArmResult]:
    """One run: each arm its own process draw u ~ N(0, tau^2), each request its own noise
    in `world`'s shape."""
    tokens = rng.choice(inputs["tokens"], n)
    ttft0 = rng.choice(inputs["ttft"], n)
    tpot0 = rng.choice(inputs["tpot"], n)
    rows = []
    for arm in ("baseline", "baseline2", "candidate"):
        u = rng.normal(0, tau)
        scale = ratio if arm == "candidate" else 1.0
        ttft = ttft0 * scale * np.exp(u + world.noise(rng, inputs["sigma_ttft"], n))
        tpot = tpot0 * scale * np.exp(u + world.noise(rng, inputs["sigma_tpot"], n))
        e2e = ttft + tpot * (tokens - 1)
        rows += [ArmResult(f"q{i:04d}", arm, "mix", True, ttft_s=float(ttft[i]),
                           e2e_s=float(e2e[i]), output_tokens=int(tokens[i]))
                 for i in range(n)]
    return rows


def timing_figures(rows: list[ArmResult], config: MetricsConfig) -> dict:
    """The run's RER and latency figures as a run computes them: its calculators' columns,
    the resampled sums and the figures (the timing part of `compute_figures`)."""
    al = align(rows)
    columns = rer.columns(al, config) | latency.columns(al, config)
    table = resample_sums(columns, al.strata, len(al.scenario_names), config.n_resamples,
                          config.seed)
    figs = rer.figures(table, al, config) + latency.figures(table, al, config)
    return {f.name: f for f in figs if f.arm == "candidate" and f.scenario == OVERALL
            and f.name in FIGURES}


def aa_exclusions(inputs: dict, world: World, runs: int, requests: int = 48,
                  resamples: int = 1000, seed: int = 0, prior: float = 0.02
                  ) -> dict[str, int]:
    """A/A runs in `world` judged as shipped (the process term at `prior`): per timing
    figure, how many runs' 95 % interval excluded no change (its coverage: 1 - k/runs)."""
    rng = np.random.default_rng([seed, 0xAA, int(world.tau_scale * 100), len(world.tails)])
    counts = dict.fromkeys(FIGURES, 0)
    for k in range(runs):
        rows = simulate(inputs, requests, world.tau, 1.0, rng, world)
        figs = timing_figures(rows, MetricsConfig(n_resamples=resamples, seed=k,
                                                  process_spread=prior))
        for name, none in FIGURES.items():
            f = figs[name]
            counts[name] += int(f.ci_low > none or f.ci_high < none)
    return counts


def rules(policy_name: str, method: str) -> dict:
    """The policy's RER and latency rules as `method` judges them."""
    policy = load_policy(default_policy_dir() / f"{policy_name}.yaml")
    out = {r.name: r for r in policy.rules if r.name in ("rer", "latency_ratio")}
    lat = out["latency_ratio"]
    if method != "process+floor" and lat.subtract_noise_floor:  # absolute B/A tolerance
        out["latency_ratio"] = replace(lat, threshold=1 + lat.threshold,
                                       subtract_noise_floor=False)
    return out


def run_experiment(inputs: dict, name: str, runs: int, requests: int = 48, tau: float = 0.02,
                   prior: float | None = None, resamples: int = 1000, seed: int = 0,
                   world: World = WORLDS["prior"], progress: bool = False
                   ) -> dict[str, dict[str, int]]:
    """Runs of experiment `name`: per method, the count of runs per key ("ci excludes no
    change: FIGURE", "POLICY: RULE STATUS")."""
    judged = {(p, m): rules(p, m) for p in POLICIES for m in METHODS}
    priors = {p: load_policy(default_policy_dir() / f"{p}.yaml").process_spread
              for p in POLICIES}
    ratio = EXPERIMENTS[name]
    rng = np.random.default_rng([seed, list(EXPERIMENTS).index(name)])
    counts: dict[str, dict[str, int]] = {m: {} for m in METHODS}
    t0 = time.monotonic()
    for k in range(runs):
        rows = simulate(inputs, requests, tau, ratio, rng, world)
        cache: dict[float, dict] = {}  # figures per process_spread: computed once
        for method in METHODS:
            for policy in POLICIES:
                spread = 0.0 if method == "per-request" else (
                    prior if prior is not None else priors[policy])
                if spread not in cache:
                    cache[spread] = timing_figures(rows, MetricsConfig(
                        n_resamples=resamples, seed=k, process_spread=spread))
                figs = cache[spread]
                c = counts[method]
                if policy == POLICIES[0]:  # calibration: does the CI exclude no change?
                    for fig_name, none in FIGURES.items():
                        f = figs[fig_name]
                        key = f"ci excludes no change: {fig_name}"
                        c[key] = c.get(key, 0) + int(f.ci_low > none or f.ci_high < none)
                for rule_name, rule in judged[(policy, method)].items():
                    status = check_figure(rule, figs[rule_name], OVERALL, True).status
                    key = f"{policy}: {rule_name} {status}"
                    c[key] = c.get(key, 0) + 1
        if progress and (k + 1) % max(1, runs // 4) == 0:
            print(f"  {name}: {k + 1}/{runs} runs, {time.monotonic() - t0:.0f}s", flush=True)
    return counts


# --- the experiment ------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-run", type=Path, help="a stored run (A/A) to take the "
                        "per-request distributions and sigma from (default: the committed "
                        "benchmarks/data/aa_costs.json)")
    parser.add_argument("--record-inputs", metavar="RUN", type=Path,
                        help="write RUN's inputs to benchmarks/data/aa_costs.json and stop")
    parser.add_argument("--sigma", type=float, default=None,
                        help="set the per-request TPOT noise sigma (TTFT's kept in the "
                             "inputs' proportion): the doc's columns")
    parser.add_argument("--world", choices=WORLDS, default="prior",
                        help="off the model: tau-2x, tau-0.5x (the true process spread over "
                             "--tau), heavy-tails (t3 per-request noise)")
    parser.add_argument("--runs", type=int, default=2000, help="simulated runs per experiment")
    parser.add_argument("--requests", type=int, default=48, help="requests per run (the demo's)")
    parser.add_argument("--tau", type=float, default=0.02,
                        help="true between-process SD of log speed in the simulation")
    parser.add_argument("--prior", type=float, default=None,
                        help="process_spread the process-aware methods assume (default: each "
                             "policy's)")
    parser.add_argument("--sigma-scale", type=float, default=1.0,
                        help="multiply the measured per-request noise (sensitivity)")
    parser.add_argument("--resamples", type=int, default=1000, help="as the gate's default")
    parser.add_argument("--experiments", default=",".join(EXPERIMENTS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.record_inputs:
        write_inputs(args.record_inputs, " ".join(sys.argv))
        return
    inputs = measured_inputs(args.from_run) if args.from_run else committed_inputs()
    if args.sigma is not None:
        inputs["sigma_ttft"] *= args.sigma / inputs["sigma_tpot"]
        inputs["sigma_tpot"] = args.sigma
    for key in ("sigma_tpot", "sigma_ttft"):
        inputs[key] *= args.sigma_scale
    world = WORLDS[args.world]
    args.tau *= world.tau_scale
    print(f"inputs: {inputs['source']}: {inputs['requests']} requests (costs from the first "
          f"{inputs['early']}), tokens median {np.median(inputs['tokens']):.0f}, unloaded TTFT "
          f"median {np.median(inputs['ttft']) * 1000:.0f} ms, TPOT median "
          f"{np.median(inputs['tpot']) * 1000:.1f} ms; per-request noise sigma "
          f"TPOT {inputs['sigma_tpot']:.3f}, TTFT {inputs['sigma_ttft']:.3f}; between-process "
          f"tau {args.tau}; {args.requests} requests x {args.runs} runs per experiment, "
          f"{args.resamples} resamples", flush=True)
    t0 = time.monotonic()
    for name in [e.strip() for e in args.experiments.split(",") if e.strip()]:
        counts = run_experiment(inputs, name, args.runs, args.requests, args.tau, args.prior,
                                args.resamples, args.seed, world, progress=True)
        print(f"\nexperiment {name} (candidate's true time ratio {EXPERIMENTS[name]}):")
        keys = sorted({key for c in counts.values() for key in c})
        for key in keys:
            row = "  ".join(f"{m}: {share(counts[m].get(key, 0), args.runs)}" for m in METHODS)
            print(f"  {key:<42} {row}")
    print(f"\n({time.monotonic() - t0:.0f}s)")


if __name__ == "__main__":
    main()
