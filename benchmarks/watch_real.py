"""`layergate watch` on real engines: false rollbacks of identical arms and time to rollback
of a candidate that turns slow, measured with the rig the test suite shares
(tests/support/watch_rig.py: two full SmolLM2 engines, a shadow replay through a proxy per
arm, a real Prometheus, a client-side and an engine-side watch).

  aa    identical arms; any rollback by either watch is a false one
  turn  the candidate's proxy stretches its responses (1 + --slowdown)x after 3 windows:
        windows and seconds from the turn to the client-side watch's rollback

Fresh engines for every run, so the spread between runs includes the spread between engine
processes. Expensive on 2 cores: a run takes about two minutes.

    .venv/bin/python benchmarks/watch_real.py --aa 5 --turn 5
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's harness

from layergate.harness.stack.engines import start_engine  # noqa: E402
from tests.support.watch_rig import Rig, run_rig  # noqa: E402

POLICY = {"name": "bench", "alpha": 0.05, "metrics": {
    "e2e_ratio": {"direction": "<=", "threshold": 1.5},
    "ttft_ratio": {"direction": "<=", "threshold": 1.5},
    "tpot_ratio": {"direction": "<=", "threshold": 1.5},
    "error_rate_delta": {"direction": "<=", "threshold": 0.5, "critical": False}}}


def one(kind: str, k: int, args, out: Path) -> dict:
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    a = start_engine("--skip-policy", "full", env=env, timeout=600)
    b = start_engine("--skip-policy", "full", env=env, timeout=600)
    try:
        rig = Rig(requests=args.requests, gap_s=args.gap, window_s=args.window, policy=POLICY)
        r = run_rig(rig, a.url, b.url, out / f"{kind}-{k:02d}",
                    args.slowdown if kind == "turn" else None)
    finally:
        a.stop()
        b.stop()
    row = {"kind": kind, "run": k, "client": r.client["verdict"], "engine": r.engine["verdict"],
           "client_windows": r.client["windows"], "engine_windows": r.engine["windows"],
           "turned_at": r.turned_at, "turn_to_decision_s": r.turn_to_decision_s,
           "deciding": r.client["reasons"][:1]}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--aa", type=int, default=3, help="A/A runs")
    p.add_argument("--turn", type=int, default=3, help="runs where the candidate turns slow")
    p.add_argument("--slowdown", type=float, default=5.0)
    p.add_argument("--requests", type=int, default=36)
    p.add_argument("--gap", type=float, default=2.0, help="seconds between requests")
    p.add_argument("--window", type=float, default=5.0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="watch-real-"))
    rows = []
    t0 = time.monotonic()
    for kind, n in (("aa", args.aa), ("turn", args.turn)):
        rows += [one(kind, k, args, out) for k in range(n)]
    aa = [r for r in rows if r["kind"] == "aa"]
    turn = [r for r in rows if r["kind"] == "turn"]
    false = sum(r["client"] == "fail" for r in aa) + sum(r["engine"] == "fail" for r in rows)
    watches = 2 * len(aa) + len(turn)
    print(f"false rollbacks: {false} of {watches} watches of identical arms "
          f"({len(aa)} A/A runs x 2 sides, + the engine side of {len(turn)} turn runs)")
    caught = [r for r in turn if r["client"] == "fail"]
    if turn:
        secs = sorted(r["turn_to_decision_s"] for r in caught)
        wins = sorted(r["client_windows"] - r["turned_at"] for r in caught)
        print(f"rolled back {len(caught)} of {len(turn)} turns; windows after the turn {wins}, "
              f"seconds {[round(s) for s in secs]} (window {args.window:g} s)")
    print(f"{time.monotonic() - t0:.0f} s; runs under {out}")
    (out / "watch_real.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
