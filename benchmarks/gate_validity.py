"""Is the gate's verdict trustworthy? Real engines, real replays, the shipped policies.

Experiments (a fresh replay, on fresh engines, every time):

  aa           full vs full vs full (baseline, baseline2, candidate): a false alarm is a
               run that does not pass `no-regression.yaml`; `default.yaml` must fail it on
               RER alone (no benefit, no release).
  static       candidate `--skip-policy static` skipping 10 layers: power = share of runs that
               fail `no-regression.yaml`.
  slow         candidate = a full engine behind a proxy that stretches every response's
               timeline by +20 % (TTFT and each chunk): power against a latency regression.
               Every arm sits behind such a proxy (the baselines' add nothing), so the
               proxies' own overhead is the same for all three.
  faster       the mirror image: the baselines' proxies stretch by 1/0.85 - 1, the
               candidate's adds nothing, so the candidate truly saves 15 % of the time
               per token (RER 0.15, latency ratio 0.85): power for a tight RER target
               (`tight.yaml`: RER >= 5 %).
  speculative  candidate `--skip-policy speculative` (lossless): must pass `no-regression.yaml`
               on consistency (exact match within the noise floor) whatever its speed.
  cache        chat-multiturn; baselines with `--prefix-cache off --padding max`, candidate
               with the prefix cache on and bucketed padding: the gate under `default.yaml`
               and the RER it measured.

The experiments run in rounds (`--repeats` rounds; `aa*2` runs A/A twice a round), so a
series cut short keeps every experiment in proportion. Each run starts its engines in an
order rotated from run to run, so a bias of start order shows apart from one of role.

Prints, per experiment, the verdicts under each policy (no-regression, default, tight) and
the key figures of every run, then the rates (with exact Clopper-Pearson intervals): each
timing figure's A/A rate of CIs excluding "no difference", the tight policy's RER and
latency checks, how many runs were saturated, and what `gate --sequential` decided on the
same runs (and after how many requests). From the unsaturated A/A runs it estimates τ, the
between-process spread the policies' `process_spread` assumes, and each role's and start
position's mean speed offset. Writes everything to OUT/validity.json after every run.
Expensive on CPU: every run replays the mix through three engines.

    .venv/bin/python benchmarks/gate_validity.py --repeats 20
    .venv/bin/python benchmarks/gate_validity.py --experiments 'aa*2,faster,slow,static' \
        --repeats 10 --max-tokens 16 --rate 0.5
    .venv/bin/python benchmarks/gate_validity.py --rejudge runs/gate-validity-...

Every replay has the demo's shape (`layergate demo`'s requests, max_tokens cap, Poisson
rate and timeout; each overridable) with a fresh draw of the mix per repeat. The
determinism sub-run is not part of these runs (the policies do not require it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's harness

from layergate.harness.gate import GateResult, evaluate_run  # noqa: E402
from layergate.harness.gate.fixed.evaluation import metrics_config, run_figures  # noqa: E402
from layergate.harness.gate.policy import default_policy_dir, load_policy  # noqa: E402
from layergate.harness.gate.sequential.decision import decide  # noqa: E402
from layergate.harness.processes import ManagedProcess  # noqa: E402
from layergate.harness.replay import ReplayConfig, run_replay  # noqa: E402
from layergate.harness.rundir import load_run  # noqa: E402
from layergate.harness.stack.demo_config import DemoConfig  # noqa: E402
from layergate.harness.stack.demo_traffic import demo_traffic  # noqa: E402
from layergate.harness.stack.engines import start_engine  # noqa: E402
from tests.support.delay_proxy import DelayProxy  # noqa: E402

EXPERIMENTS = ("aa", "static", "slow", "faster", "speculative", "cache")
POLICIES = ("no-regression", "default", "tight")
SKIPPED_LAYERS = ",".join(str(i) for i in range(10, 20))  # 10 of SmolLM2's 30 layers
SLOWDOWN = 0.20
SAVING = 0.15  # `faster`: the share of time per token the candidate truly saves
PLAIN_CONFIDENCE = 0.6827  # +-1 SE: the per-request intervals the spread estimate reads
# the calibrated timing figures and their "no difference" value
TIMING = {"rer": 0.0, "rer_decode": 0.0, "latency_ratio": 1.0, "ttft_latency_ratio": 1.0,
          "tpot_latency_ratio": 1.0}


@dataclass
class Outcome:
    experiment: str
    repeat: int
    run_dir: str
    verdicts: dict[str, str]
    failing: dict[str, list[str]]  # policy -> gating checks that failed
    unsure: dict[str, list[str]] = field(default_factory=dict)  # ... that were inconclusive
    figures: dict[str, list[float | None]] = field(default_factory=dict)
    statuses: dict[str, str] = field(default_factory=dict)  # check -> status under default
    saturated: list[str] = field(default_factory=list)  # arms that queued
    raw: dict[str, list[float | None]] = field(default_factory=dict)  # figure, CI (no floor)
    floor: dict[str, list[float | None]] = field(default_factory=dict)  # A'/A, CI
    start_order: list[str] = field(default_factory=list)  # the engines, first started first
    # arm -> timing figure -> [value, ci_low, ci_high, n] with no between-process term (the
    # per-request bootstrap alone): what the process-spread estimate needs
    plain: dict[str, dict[str, list[float | None]]] = field(default_factory=dict)
    # policy -> [verdict, decided, requests judged]: `gate --sequential` on the stored run,
    # in send order (what `replay --until-decided` would have stopped at)
    sequential: dict[str, list] = field(default_factory=dict)


# --- engines ----------------------------------------------------------------------------

def start_order(repeat: int) -> list[str]:
    """The arms in the order their engines start: rotated every repeat, so that no role
    always gets the first (or last) process started and an effect of start order shows
    up apart from an effect of the role."""
    arms = ["baseline", "baseline2", "candidate"]
    shift = repeat % len(arms)
    return arms[shift:] + arms[:shift]


@contextlib.contextmanager
def engines(order: list[str], **arms: tuple[str, ...]) -> Iterator[dict[str, ManagedProcess]]:
    """One `layergate serve` per arm, 1 torch thread each, started in `order`; stopped on
    exit."""
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    started: dict[str, ManagedProcess] = {}
    try:
        for arm in order:
            args = arms[arm]
            started[arm] = start_engine(*args, threads=1, env=env, timeout=600)
            print(f"  {arm}: {' '.join(args)} at {started[arm].url}", flush=True)
        yield started
    finally:
        for proc in started.values():
            proc.stop()


# --- one replay, judged under every policy -----------------------------------------------

def replay_and_judge(experiment: str, repeat: int, arms: dict[str, str], order: list[str],
                     args) -> Outcome:
    """One replay of the demo's traffic shape, drawn with its own seed (another sample of
    the mix and other arrival times every repeat), judged under every shipped policy."""
    out = Path(args.out) / f"{experiment}-{repeat:02d}"
    scenario = "chat-multiturn" if experiment == "cache" else args.scenario
    traffic = demo_traffic(scenario, out.parent / f"{out.name}.traffic.jsonl",
                           args.requests, args.max_tokens,
                           None if args.users or args.mix_arrivals else args.rate,
                           seed=1000 + repeat)
    config = ReplayConfig(out=out, arms=arms, traffic=traffic, users=args.users,
                          timeout=args.timeout, progress=False)
    t0 = time.monotonic()
    run_dir = run_replay(config)
    (run_dir / "validity-engines.json").write_text(json.dumps({"start_order": order}))
    outcome = judge(experiment, repeat, run_dir)
    print(f"  [{experiment} #{repeat}] {time.monotonic() - t0:.0f}s  {describe(outcome)}",
          flush=True)
    return outcome


def judge(experiment: str, repeat: int, run_dir: Path) -> Outcome:
    """The run under each shipped policy: verdicts, failing checks, key figures."""
    run = load_run(run_dir)
    policies = {name: load_policy(default_policy_dir() / f"{name}.yaml") for name in POLICIES}
    results: dict[str, GateResult] = {
        name: evaluate_run(run, policy) for name, policy in policies.items()}
    outcome = Outcome(experiment, repeat, str(run_dir),
                      {p: r.verdict for p, r in results.items()},
                      {p: _gating(r, "fail") for p, r in results.items()},
                      {p: _gating(r, "inconclusive") for p, r in results.items()})
    engines_file = run_dir / "validity-engines.json"
    if engines_file.exists():
        outcome.start_order = json.loads(engines_file.read_text())["start_order"]
    checks = {c.name: c for c in results["default"].overall}
    for name in ("rer", "latency_ratio", "exact_match", "termination_accuracy",
                 "cache_hit_delta"):
        c = checks.get(name)
        if c is not None:
            outcome.figures[name] = [c.compared if c.compared is not None else c.value,
                                     c.compared_low, c.compared_high]
            outcome.statuses[name] = c.status
    per_request = replace(metrics_config(policies["default"], run),
                          process_spread=0.0, confidence=PLAIN_CONFIDENCE)
    for f in run_figures(run, per_request):
        if f.scenario == "all" and f.name in TIMING and f.arm in ("baseline2", "candidate"):
            outcome.plain.setdefault(f.arm, {})[f.name] = [f.value, f.ci_low, f.ci_high, f.n]
    for name, policy in policies.items():
        d = decide(run, policy)
        outcome.sequential[name] = [d.verdict, d.decided, d.n]
    for c in results["tight"].overall:  # the tight policy's own checks
        if c.name in ("rer", "latency_ratio"):
            outcome.statuses[f"tight:{c.name}"] = c.status
    for f in results["default"].figures:
        if f.scenario != "all":
            continue
        if f.arm == "candidate" and f.name in TIMING:
            outcome.raw[f.name] = [f.value, f.ci_low, f.ci_high]
        if f.arm == "baseline2" and f.name in TIMING:
            outcome.floor[f.name] = [f.value, f.ci_low, f.ci_high]
        if f.name == "ttft_growth" and f.detail.get("saturated"):
            outcome.saturated.append(f.arm)
    return outcome


def _gating(result: GateResult, status: str) -> list[str]:
    """The gating checks of `result` with `status`, as name[arm]."""
    return [f"{c.name}[{c.arm}]" for c in result.checks if c.gating and c.status == status]


def describe(o: Outcome) -> str:
    return ("  ".join(f"{p}: {v}" for p, v in o.verdicts.items())
            + "  | " + "  ".join(f"{k} {v}" for k, v in o.statuses.items()
                                 if k.startswith("tight:"))
            + "  | " + "  ".join(f"{k} {_fmt(v)} {o.statuses.get(k, '')}"
                                 for k, v in o.figures.items() if not k.startswith("tight:"))
            + (f"  | failing(no-regression): {o.failing['no-regression']}"
               if o.failing["no-regression"] else "")
            + (f"  | inconclusive(no-regression): {o.unsure['no-regression']}"
               if o.unsure.get("no-regression") else "")
            + (f"  | SATURATED: {', '.join(o.saturated)}" if o.saturated else ""))


def _fmt(v: list[float | None]) -> str:
    def f(x: float | None) -> str:
        return "—" if x is None else f"{x:.3f}"
    return f"{f(v[0])} [{f(v[1])}, {f(v[2])}]"


def run_once(name: str, repeat: int, args) -> Outcome:
    """One replay on fresh engines: all three arms start with the same (empty) prefix
    cache, and each run draws its own processes, so the spread between runs includes the
    spread between engine processes (one process can run a percent or two faster than
    another for its whole life) as it does between real deployments."""
    full = ("--skip-policy", "full")
    candidates = {"aa": full, "slow": full, "faster": full,
                  "static": ("--skip-policy", "static", "--skip-layers", SKIPPED_LAYERS),
                  "speculative": ("--skip-policy", "speculative")}
    plain = (*full, "--prefix-cache", "off", "--padding", "max")
    baseline = plain if name == "cache" else full
    candidate = (*full, "--prefix-cache", "on", "--padding", "bucketed") \
        if name == "cache" else candidates[name]
    stretch = {"slow": {"baseline": 0.0, "baseline2": 0.0, "candidate": SLOWDOWN},
               "faster": {"baseline": 1 / (1 - SAVING) - 1, "baseline2": 1 / (1 - SAVING) - 1,
                          "candidate": 0.0}}.get(name, {})
    order = start_order(repeat)
    with engines(order, baseline=baseline, baseline2=baseline, candidate=candidate) as procs:
        arms = {arm: procs[arm].url for arm in ("baseline", "baseline2", "candidate")}
        with contextlib.ExitStack() as stack:
            for arm, extra in stretch.items():
                arms[arm] = stack.enter_context(DelayProxy(arms[arm], extra)).url
            return replay_and_judge(name, repeat, arms, order, args)


def rounds(chosen: dict[str, int], first: int, repeats: int) -> Iterator[tuple[str, int]]:
    """(experiment, repeat) in rounds: every round runs each experiment its weight's
    number of times, so a series cut short still has every experiment in proportion and
    slow drift of the machine touches all of them alike."""
    counts = dict.fromkeys(chosen, first)
    for _ in range(repeats):
        for name, weight in chosen.items():
            for _ in range(weight):
                yield name, counts[name]
                counts[name] += 1


def replay_all(chosen: dict[str, int], args) -> list[Outcome]:
    os.makedirs(args.out, exist_ok=True)
    outcomes: list[Outcome] = []
    for name, repeat in rounds(chosen, args.first, args.repeats):
        print(f"experiment {name} #{repeat}", flush=True)
        outcomes.append(run_once(name, repeat, args))
        save(outcomes, args)  # after every run: a series stopped early keeps what it has
    return outcomes


def save(outcomes: list[Outcome], args) -> Path:
    path = Path(args.out) / "validity.json"
    path.write_text(json.dumps({"args": vars(args), "summary": summarise(outcomes),
                                "runs": [o.__dict__ for o in outcomes]}, indent=2))
    return path


def share(k: int, n: int) -> dict[str, float | int]:
    """k of n runs, with its exact (Clopper-Pearson) 95 % interval: 20 of 20 still only
    shows a rate >= 0.83."""
    from scipy.stats import beta

    low = float(beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    high = float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return {"k": k, "n": n, "rate": k / n, "ci95": [round(low, 3), round(high, 3)]}


def summarise(outcomes: list[Outcome]) -> dict[str, dict]:
    summary: dict[str, dict] = {}
    for name in EXPERIMENTS:
        runs = [o for o in outcomes if o.experiment == name]
        if not runs:
            continue
        n = len(runs)
        row: dict = {"runs": n}
        for policy in POLICIES:
            for verdict in ("pass", "fail", "inconclusive"):
                row[f"{policy}:{verdict}"] = share(
                    sum(o.verdicts[policy] == verdict for o in runs), n)
        row["default fails on rer alone"] = share(
            sum(o.failing["default"] == ["rer[candidate]"] for o in runs), n)
        row["exact_match passes"] = share(
            sum(o.statuses.get("exact_match") == "pass" for o in runs), n)
        for name_ in ("rer", "latency_ratio", "cache_hit_delta"):
            values = [o.figures[name_] for o in runs if o.figures.get(name_, [None])[0]
                      is not None]
            if values:
                row[f"mean {name_}"] = sum(v[0] for v in values) / len(values)
        rers = [o.figures["rer"] for o in runs if o.figures.get("rer", [None, None])[1]
                is not None]
        # an identical candidate's RER CI should cover 0 about 95 % of the time
        row["rer ci above 0"] = share(sum(v[1] > 0 for v in rers), len(rers)) if rers else None
        for fig, none in TIMING.items():  # A/A: each should exclude it in <= 5 % of runs
            cis = [o.raw[fig] for o in runs if o.raw.get(fig, [None, None])[1] is not None]
            if cis:
                row[f"{fig} ci excludes {none:g}"] = share(
                    sum(v[1] > none or v[2] < none for v in cis), len(cis))
        for check in ("tight:rer", "tight:latency_ratio"):
            for status in ("pass", "fail"):
                row[f"{check} {status}"] = share(
                    sum(o.statuses.get(check) == status for o in runs), n)
        row["saturated"] = share(sum(bool(o.saturated) for o in runs), n)
        for policy in POLICIES:  # the sequential gate on the same runs, in send order
            seq = [o.sequential[policy] for o in runs if policy in o.sequential]
            for verdict in ("pass", "fail"):
                hits = [k for v, decided, k in seq if decided and v == verdict]
                row[f"sequential {policy}:{verdict}"] = share(len(hits), len(seq)) if seq else None
                if hits:
                    row[f"sequential {policy}:{verdict} median requests"] = float(np.median(hits))
        summary[name] = row
    aa = [o for o in outcomes if o.experiment == "aa" and not o.saturated]
    spreads = {fig: process_spread(aa, fig) for fig in TIMING}
    if any(spreads.values()):
        summary["process spread (unsaturated A/A)"] = {
            fig: est for fig, est in spreads.items() if est is not None}
    return summary


def log_offset(plain: list[float | None], figure: str) -> tuple[float, float] | None:
    """A figure of an arm against the baseline as a log time ratio d (> 0: slower than the
    baseline) and its per-request standard error, read off the +-1 SE (expanded) interval."""
    from scipy.stats import norm

    from layergate.exporters.catalogue import figure_spec
    from layergate.exporters.figures.bootstrap import expanded
    from layergate.exporters.figures.process_spread import to_ratio

    value, low, high, n = plain
    if value is None or low is None or high is None or not n:
        return None
    timing = figure_spec(figure).timing
    ends = sorted(float(to_ratio(x, timing)) for x in (low, high))
    if min(ends) <= 0 or float(to_ratio(value, timing)) <= 0:
        return None
    z = float(norm.ppf((1 + expanded(PLAIN_CONFIDENCE, int(n))) / 2))
    se = (math.log(ends[1]) - math.log(ends[0])) / (2 * z)
    return math.log(float(to_ratio(value, timing))), se


def process_spread(outcomes: list[Outcome], figure: str) -> dict | None:
    """τ, the between-process spread of engine speed, from A/A runs (three identical arms,
    fresh processes per run). Each arm's log time ratio against the baseline, d = u_X - u_A
    + e, has variance 2τ² + se², so (d² - se²)/2 estimates τ² (averaged over the runs and
    both arms; the 90 % upper bound from resampling runs). Also: whether the candidate's
    role, or an engine's start position, moves its speed (the arm-order question): each
    run's three effects (0, d_A', d_B) centred on their mean, averaged by role and by
    start position, with their standard errors over runs."""
    rows = []
    for o in outcomes:
        offs = {arm: log_offset(o.plain.get(arm, {}).get(figure, [None] * 4), figure)
                for arm in ("baseline2", "candidate")}
        if all(offs.values()):
            rows.append((o, offs))
    if len(rows) < 3:
        return None
    terms = np.array([[(d * d - se * se) / 2 for d, se in offs.values()] for _, offs in rows])
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(rows), (4000, len(rows)))
    boot = terms.mean(axis=1)[picks].mean(axis=1)
    effects: dict[str, list[float]] = {}
    for o, offs in rows:
        e = {"baseline": 0.0, "baseline2": offs["baseline2"][0], "candidate": offs["candidate"][0]}
        centre = sum(e.values()) / 3
        for arm, x in e.items():
            effects.setdefault(f"role {arm}", []).append(x - centre)
            if o.start_order:
                effects.setdefault(f"started {o.start_order.index(arm) + 1}", []).append(x - centre)

    def mean_se(xs: list[float]) -> list[float]:
        return [float(np.mean(xs)), float(np.std(xs, ddof=1) / math.sqrt(len(xs)))]

    tau2 = float(terms.mean())
    return {"runs": len(rows), "tau": math.sqrt(max(tau2, 0.0)),
            "tau_upper90": math.sqrt(max(float(np.quantile(boot, 0.9)), 0.0)),
            "per_request_se": float(np.median([se for _, offs in rows
                                               for _, se in offs.values()])),
            "effects": {k: mean_se(v) for k, v in sorted(effects.items())}}


def _show_spread(fig: str, est: dict) -> str:
    effects = "  ".join(f"{k} {m:+.4f}±{se:.4f}" for k, (m, se) in est["effects"].items())
    return (f"    {fig}: tau {est['tau']:.4f} (90 % upper {est['tau_upper90']:.4f}) from "
            f"{est['runs']} runs; per-request se {est['per_request_se']:.4f}\n"
            f"      log offsets: {effects}")


def _show(v: object) -> str:
    if isinstance(v, dict) and "k" in v:
        return f"{v['k']}/{v['n']} [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}]"
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20,
                        help="rounds: each runs every experiment its weight's times")
    parser.add_argument("--first", type=int, default=0,
                        help="number of the first repeat (and its traffic seed): more runs "
                             "for an earlier --out start where it stopped")
    parser.add_argument("--experiments", default=",".join(EXPERIMENTS),
                        help=f"comma-separated subset of {','.join(EXPERIMENTS)}, each with "
                             "an optional weight (aa*2: two A/A runs per round)")
    parser.add_argument("--scenario", default="saas-mix", help="mix for all but `cache`")
    demo = DemoConfig(out=Path("runs"))
    parser.add_argument("--requests", type=int, default=demo.requests,
                        help="requests per replay (default: the demo's)")
    parser.add_argument("--max-tokens", type=int, default=demo.max_tokens,
                        help="cap on each request's max_tokens (default: the demo's)")
    parser.add_argument("--rate", type=float, default=demo.rate,
                        help="Poisson arrivals per second (default: the demo's)")
    parser.add_argument("--mix-arrivals", action="store_true",
                        help="the mix's own arrival schedule instead of --rate")
    parser.add_argument("--users", type=int, default=None,
                        help="closed loop with N users instead of Poisson arrivals (for a "
                             "machine too slow to keep up with them)")
    parser.add_argument("--timeout", type=float, default=demo.timeout_s,
                        help="per-request timeout, seconds (default: the demo's)")
    parser.add_argument("--out", default=f"runs/gate-validity-{time.strftime('%Y%m%dT%H%M%S')}",
                        help="directory for the runs and validity.json")
    parser.add_argument("--rejudge", metavar="DIR",
                        help="replay nothing: judge the runs kept in DIR (an earlier --out) "
                             "under the policies as they are now")
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the engines and Locust started here are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    chosen = parse_experiments(args.experiments, parser)
    unknown = set(chosen) - set(EXPERIMENTS)
    if unknown:
        parser.error(f"unknown experiment(s) {sorted(unknown)}; choose from {EXPERIMENTS}")
    t0 = time.monotonic()
    if args.rejudge:  # the runs of an earlier invocation, under the policies as they are now
        outcomes = []
        for run_dir in sorted(Path(args.rejudge).glob("*-[0-9][0-9]")):
            name, _, k = run_dir.name.rpartition("-")
            outcomes.append(judge(name, int(k), run_dir))
            print(f"  [{name} #{int(k)}] {describe(outcomes[-1])}", flush=True)
        args.out = args.rejudge
    else:
        outcomes = replay_all(chosen, args)
    summary = summarise(outcomes)
    print(f"\nsummary ({time.monotonic() - t0:.0f}s):")
    for name, row in summary.items():
        if name.startswith("process spread"):
            print(f"  {name}:\n" + "\n".join(_show_spread(f, e) for f, e in row.items()))
        else:
            print(f"  {name}: " + ", ".join(f"{k} {_show(v)}" for k, v in row.items()))
    print(f"wrote {save(outcomes, args)}")


def parse_experiments(text: str, parser: argparse.ArgumentParser) -> dict[str, int]:
    """"aa*2,slow" -> {"aa": 2, "slow": 1}."""
    chosen: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, weight = part.partition("*")
        if weight and not (weight.isdigit() and int(weight) > 0):
            parser.error(f"--experiments: weight of {name!r} must be a positive integer, "
                         f"got {weight!r}")
        chosen[name] = chosen.get(name, 0) + (int(weight) if weight else 1)
    return chosen


if __name__ == "__main__":
    main()
