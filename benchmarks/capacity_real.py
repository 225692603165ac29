"""`layergate capacity` on real engines: the capacity of `full`, `static` (12 layers
skipped), `speculative` and `dynamic` under one SLO, side by side, with each candidate's
ratio to `full` (its interval), its theoretical saving and how much of it became capacity;
beside it the fixed-rate view a one-rate gate sees (E2E p50 at the ladder's first, gentle
step, candidate / full), so a candidate that wins at low load and carries less shows.

Each candidate is swept against a fresh `full` engine (two engines, one torch thread each:
they fit two cores), one candidate after another, on the same traffic, ladder and SLO.
Expensive on 2 cores: about two minutes a candidate.

    .venv/bin/python benchmarks/capacity_real.py [--slo e2e:8s] [--load users --start 1]

Closed loop by default: a CPU engine with one thread carries well under a request a second
on a busy 2-core machine, where a ladder of rates spends minutes a step.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's harness

from layergate.harness.processes import layergate_command  # noqa: E402
from layergate.harness.stack.engines import start_engine  # noqa: E402
from tests.support.traffic import traffic  # noqa: E402

STATIC = ("--skip-policy", "static", "--skip-layers", ",".join(map(str, range(9, 21))))
CANDIDATES = {"static": STATIC, "speculative": ("--skip-policy", "speculative"),
              "dynamic": ("--skip-policy", "dynamic")}


def sweep(name: str, args: tuple[str, ...], opts: argparse.Namespace, tmp: Path) -> dict:
    full, cand = start_engine("--skip-policy", "full"), start_engine(*args)
    try:
        out = tmp / name
        began = time.monotonic()
        done = subprocess.run(layergate_command(
            "capacity", "--traffic", str(traffic(tmp / "t.jsonl", 16, 0.1)),
            "--baseline", full.url, "--candidate", cand.url, "--out", str(out),
            "--slo", opts.slo, "--load", opts.load, "--start", str(opts.start), "--factor",
            "2", "--bisections", str(opts.bisections), "--warmup", str(opts.warmup),
            "--min-duration", str(opts.duration), "--min-requests", str(opts.requests),
            "--max-load", str(opts.max_load), "--no-progress"),
            capture_output=True, text=True)
        print(f"{name}: exit {done.returncode} in {time.monotonic() - began:.0f}s",
              file=sys.stderr)
        return json.loads((out / "capacity-report.json").read_text())
    finally:
        full.stop()
        cand.stop()


def _figure(report: dict, name: str, arm: str) -> dict | None:
    return next((f for f in report["figures"] if f["name"] == name and f["arm"] == arm), None)


def _low_step_ratio(report: dict) -> float | None:
    base, cand = (report["arms"][a]["steps"] for a in ("baseline", "candidate"))
    if not base or not cand or base[0]["e2e_p50"] is None or cand[0]["e2e_p50"] is None:
        return None
    return cand[0]["e2e_p50"] / base[0]["e2e_p50"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slo", default="e2e:8s")
    parser.add_argument("--load", choices=("rate", "users"), default="users")
    parser.add_argument("--start", type=float, default=1)
    parser.add_argument("--max-load", type=float, default=8)
    parser.add_argument("--bisections", type=int, default=1)
    parser.add_argument("--warmup", type=float, default=0)
    parser.add_argument("--duration", type=float, default=0)
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--only", nargs="*", default=list(CANDIDATES))
    opts = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="capacity-real-") as tmp:
        for name in opts.only:
            report = sweep(name, CANDIDATES[name], opts, Path(tmp))
            ratio = _figure(report, "capacity_ratio", "candidate") or {}
            real = _figure(report, "capacity_realisation", "candidate") or {}
            rows.append((name, report["arms"]["baseline"]["text"],
                         report["arms"]["candidate"]["text"], ratio, real,
                         _low_step_ratio(report)))
    unit = "req/s" if opts.load == "rate" else "users"
    print(f"SLO {opts.slo}, attainment 0.95; {opts.load} ladder from {opts.start:g} {unit} x2 "
          f"to {opts.max_load:g}, {opts.bisections} bisection(s); each candidate against its "
          "own full engine")
    print(f"{'candidate':<12} {'full':>14} {'candidate':>14} {'ratio [95% CI]':>22} "
          f"{'theoretical':>11} {'realised':>9} {'E2E p50 ratio at first step':>28}")
    for name, full, cand, ratio, real, low in rows:
        value = ratio.get("value")
        ci = (f"{value:.2f} [{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]"
              if value is not None and ratio.get("ci_low") is not None
              and ratio.get("status") == "ok" else "n/a (a bound, see the capacities)")
        saving = (real.get("detail") or {}).get("theoretical_saving")
        realised = real.get("value") if real.get("status") == "ok" else None
        print(f"{name:<12} {full:>14} {cand:>14} {ci:>22} {_num(saving):>11} "
              f"{_num(realised):>9} {_num(low):>28}")


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


if __name__ == "__main__":
    main()
