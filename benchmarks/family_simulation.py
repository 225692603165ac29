"""Several candidates judged as a family: is the family-wise false pass held, and does the
recommendation's interval hold after it was selected? Simulated runs, real gate code.

Each simulated family replays N requests through baseline A, baseline2 A' and three
candidates, every arm's process with its own log speed factor u ~ N(0, tau^2) and every
request on every arm its own log-time noise (benchmarks/gate_simulation.py's model and
its committed inputs, benchmarks/data/aa_costs.json). Each candidate's figures come from
the gate's calculators (alignment,
resampled sums, layergate.exporters.figures.rer with its between-process term, the candidate's own
process draw), each candidate is judged by the real `apply_policy` of an RER rule, the
family by the real `adjusted_verdicts` (Holm) and `FamilyResult` (comparisons with the best,
the recommendation and its selection-adjusted interval).

  threshold   all three candidates' true RER exactly at the rule's threshold (0.20):
              any pass is a false pass; family-wise false pass should be <= alpha (0.05)
  equal       all three at a true RER of 0.35 (each passes often): how often the
              recommended candidate's lower bound lies above the truth (<= 2.5 % for a
              two-sided 95 % interval), against the old rule (the largest point, its
              interval at its own Holm level)

    .venv/bin/python benchmarks/family_simulation.py --families 2000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gate_simulation import committed_inputs, share  # noqa: E402
from layergate.exporters.catalogue import HOLM, PASS, REQUIRE_ANY  # noqa: E402
from layergate.exporters.figures import OVERALL, rer  # noqa: E402
from layergate.exporters.figures.aligned import align  # noqa: E402
from layergate.exporters.figures.bootstrap import expanded, percentile_ci, resample_sums  # noqa: E402
from layergate.exporters.figures.config import MetricsConfig  # noqa: E402
from layergate.exporters.records import ArmResult  # noqa: E402
from layergate.harness.gate import CandidateVerdict, FamilyResult, apply_policy  # noqa: E402
from layergate.harness.gate.fixed.family import adjusted_verdicts  # noqa: E402
from layergate.harness.gate.policy import parse_policy  # noqa: E402

NAMES = ("c1", "c2", "c3")
THRESHOLD = 0.20
EXPERIMENTS = {"threshold": THRESHOLD, "equal": 0.35}
POLICY = parse_policy({"name": "family-sim", "min_samples": 20, "metrics": {
    "rer": {"direction": ">=", "threshold": THRESHOLD}}})


def simulate(inputs: dict, n: int, tau: float, saving: float, rng: np.random.Generator
             ) -> dict[str, list[ArmResult]]:
    """Rows per arm: the reference arms, then each candidate at time ratio 1 - saving."""
    tokens = rng.choice(inputs["tokens"], n)
    ttft0 = rng.choice(inputs["ttft"], n)
    tpot0 = rng.choice(inputs["tpot"], n)
    out = {}
    for arm in ("baseline", "baseline2", *NAMES):
        u = rng.normal(0, tau)
        scale = 1 - saving if arm in NAMES else 1.0
        ttft = ttft0 * scale * np.exp(u + rng.normal(0, inputs["sigma_ttft"], n))
        tpot = tpot0 * scale * np.exp(u + rng.normal(0, inputs["sigma_tpot"], n))
        e2e = ttft + tpot * (tokens - 1)
        out[arm] = [ArmResult(f"q{i:04d}", arm if arm not in NAMES else "candidate", "mix",
                              True, ttft_s=float(ttft[i]), e2e_s=float(e2e[i]),
                              output_tokens=int(tokens[i])) for i in range(n)]
    return out


def family(rows: dict[str, list[ArmResult]], config: MetricsConfig) -> FamilyResult:
    manifest = {"id": "sim", "status": "complete", "arms": dict.fromkeys(
        ("baseline", "baseline2", "candidate"), "http://127.0.0.1")}
    made = {}
    for name in NAMES:
        arm_rows = rows["baseline"] + rows["baseline2"] + rows[name]
        al = align(arm_rows)
        table = resample_sums(rer.columns(al, config), al.strata, len(al.scenario_names),
                              config.n_resamples, config.seed)
        made[name] = (al, table, arm_rows)

    def verdict_at(name: str, level: float, keep: dict | None) -> CandidateVerdict:
        al, table, arm_rows = made[name]
        at = MetricsConfig(n_resamples=config.n_resamples, seed=config.seed,
                           confidence=level, process_key=name, keep_resamples=keep,
                           process_spread=config.process_spread)
        figures = rer.figures(table, al, at)
        return CandidateVerdict(name, apply_policy(POLICY, figures, manifest, arm_rows),
                                level)

    alpha = round(1 - config.confidence, 12)
    judged = adjusted_verdicts(NAMES, HOLM, alpha, verdict_at)
    return FamilyResult(tuple(judged[n] for n in NAMES), HOLM, alpha, REQUIRE_ANY)


def old_recommendation_low(fam: FamilyResult, n: int) -> tuple[float, float] | None:
    """The rule before: the passing candidate with the largest point; (its lower bound at
    the level of its last Holm step, its own 95 % lower bound)."""
    passing = [c for c in fam.candidates if c.verdict == PASS]
    if not passing:
        return None
    best = max(passing, key=lambda c: c.saving.key)
    fig = next(f for f in best.result.figures if f.name == "rer" and f.arm == "candidate"
               and f.scenario == OVERALL)
    own = percentile_ci(np.asarray(best.rer_resamples), expanded(0.95, n))[0]
    return fig.ci_low, own


def counts(label: str, families: int, requests: int = 48, tau: float = 0.02,
           resamples: int = 1000, seed: int = 1) -> dict[str, int]:
    """`families` of experiment `label`: how many had any candidate pass, a recommendation,
    its lower bound above the truth, and the old rule's two lower bounds above it. What
    `make validity` reruns."""
    saving = EXPERIMENTS[label]
    inputs = committed_inputs()
    config = MetricsConfig(n_resamples=resamples, process_spread=tau)
    rng = np.random.default_rng([seed, int(saving * 1000)])
    out = dict.fromkeys(("any pass", "recommended", "recommended above", "old", "old above",
                         "own above"), 0)
    for _ in range(families):
        fam = family(simulate(inputs, requests, tau, saving, rng), config)
        out["any pass"] += any(c.verdict == PASS for c in fam.candidates)
        interval = fam.recommended_interval
        if interval is not None:
            out["recommended"] += 1
            out["recommended above"] += interval[0] is not None and interval[0] > saving
        lows = old_recommendation_low(fam, requests)
        if lows is not None:
            out["old"] += 1
            out["old above"] += lows[0] > saving
            out["own above"] += lows[1] > saving
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--tau", type=float, default=0.02)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"{args.families} families of {len(NAMES)} candidates, {args.requests} requests, "
          f"tau {args.tau}, rule rer >= {THRESHOLD}, Holm at alpha 0.05")
    for label, saving in EXPERIMENTS.items():
        started = time.time()
        c = counts(label, args.families, args.requests, args.tau, args.resamples, args.seed)
        print(f"\n{label}: true RER {saving} for every candidate "
              f"({time.time() - started:.0f} s)")
        print(f"  family-wise pass (any candidate): {share(c['any pass'], args.families)}")
        if c["recommended"] and label == "equal":  # at the threshold every pass is above
            print(f"  recommended: {c['recommended']}; its lower bound above the truth: "
                  f"{share(c['recommended above'], c['recommended'])}")
            print(f"  old rule (largest point): its interval at its Holm level "
                  f"{share(c['old above'], c['old'])}; its own 95 % interval "
                  f"{share(c['own above'], c['old'])}")


if __name__ == "__main__":
    main()
