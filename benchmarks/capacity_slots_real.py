"""Replicated capacity sweeps on real slot servers: `layergate capacity --replicates R` end
to end against the suite's stdlib echo servers with slots (tests/support/echo_server.py
--slots: an M/D/c queue, 0.1 s a token, 4 tokens a request), 4 slots against 6, repeated
`--sweeps` times with fresh seeds; prints each sweep's interval across replicates and how
often it covered the M/D/c truth (tests/support/slots.py, the steady state).

    .venv/bin/python benchmarks/capacity_slots_real.py --sweeps 20 --replicates 3 --jobs 4
    .venv/bin/python benchmarks/capacity_slots_real.py --sweeps 20 --replicates 6 --jobs 4 \
        --restart

`--restart`: each replicate on restarted servers (`capacity --restart CMD`, the interval
across replicates the signed-rank one), CMD a script written here that stops the job's two
servers and starts them again on their ports.

Expensive: one sweep of R replicates is R ladders of a few 7 s steps (minutes). `--jobs J`
runs J sweeps at once, each against servers of its own (the servers sleep, they do not
compute, so J sweeps share two cores with little effect on the times they serve).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gate_simulation import share  # noqa: E402
from layergate.harness.processes import free_port, layergate_command  # noqa: E402
from tests.support.echo import ECHO, echo_server  # noqa: E402
from tests.support.slots import true_capacity  # noqa: E402
from tests.support.traffic import traffic  # noqa: E402

TOKEN_S, TOKENS, LIMIT_S, ATTAINMENT = 0.1, 4, 0.5, 0.9
LADDER = ("--start", "5", "--factor", "2", "--bisections", "2", "--warmup", "2",
          "--min-duration", "5", "--min-requests", "30", "--max-in-flight", "64",
          "--resamples", "200", "--slo-attainment", str(ATTAINMENT), "--no-progress",
          "--slo", f"ttft:{int(LIMIT_S * 1000)}ms")


SLOTS = {"baseline": 4, "candidate": 6}
# stop the job's servers (waiting until they are gone, as --restart asks), start them again
RESTART = """#!/bin/sh
cd "$(dirname "$0")"
for arm in {arms}; do
  if [ -f $arm.pid ]; then
    pid=$(cat $arm.pid); kill $pid 2>/dev/null
    while kill -0 $pid 2>/dev/null; do sleep 0.1; done
  fi
done
{starts}
"""
START = ("{python} {echo} --port {port} --token-delay {token} --slots {slots} "
         "</dev/null >>{arm}.log 2>&1 &\necho $! > {arm}.pid")


def _restartable(home: Path) -> tuple[dict[str, str], str]:
    """The job's servers started by a restart script of their own, which `capacity
    --restart` runs again before each replicate: their URLs and the command."""
    ports = {arm: free_port() for arm in SLOTS}
    script = home / "restart.sh"
    script.write_text(RESTART.format(arms=" ".join(SLOTS), starts="\n".join(
        START.format(python=shlex.quote(sys.executable), echo=shlex.quote(str(ECHO)),
                     port=ports[arm], token=TOKEN_S, slots=n, arm=arm)
        for arm, n in SLOTS.items())))
    subprocess.run(["/bin/sh", str(script)], check=True)
    return {arm: f"http://127.0.0.1:{port}" for arm, port in ports.items()}, f"sh {script}"


def _stop(home: Path) -> None:
    for pid in home.glob("*.pid"):
        subprocess.run(["kill", pid.read_text().strip()], check=False)


def _sweep(i: int, args: argparse.Namespace, tmp: Path, urls: dict[str, str],
           path: Path, truth: float, restart: str | None) -> bool | None:
    """Sweep `i` (R replicates) against `urls`: whether its interval covered the truth
    (None: it gave none)."""
    out = tmp / f"sweep-{i:02d}"
    began = time.monotonic()
    run = subprocess.run(layergate_command(
        "capacity", "--traffic", str(path), "--baseline", urls["baseline"],
        "--candidate", urls["candidate"], "--out", str(out), *LADDER,
        "--replicates", str(args.replicates), "--seed", str(args.seed + 100 * i),
        *(("--restart", restart, "--restart-timeout", "60") if restart else ())),
        capture_output=True, text=True)
    report = json.loads((out / "replicates.json").read_text()) \
        if (out / "replicates.json").is_file() else {}
    ratio = report.get("capacity_ratio")
    took = time.monotonic() - began
    if ratio is None:
        print(f"sweep {i}: exit {run.returncode}, no interval ({took:.0f} s): "
              f"{run.stderr[-300:]}", flush=True)
        return None
    hit = ratio["ci_low"] <= truth <= ratio["ci_high"]
    print(f"sweep {i}: {ratio['value']:.3f} [{ratio['ci_low']:.3f}, "
          f"{ratio['ci_high']:.3f}] {'covers' if hit else 'MISSES'} ({took:.0f} s; "
          f"{report['target_text']})", flush=True)
    return hit


def _job(j: int, args: argparse.Namespace, tmp: Path, truth: float) -> list[bool | None]:
    """Sweeps j, j + J, j + 2J, ... against servers of this job's own."""
    path = traffic(tmp / f"t{j}.jsonl", 16, 0.1)
    if args.restart:
        home = tmp / f"servers-{j}"
        home.mkdir()
        try:
            urls, restart = _restartable(home)
            return [_sweep(i, args, tmp, urls, path, truth, restart)
                    for i in range(j, args.sweeps, args.jobs)]
        finally:
            _stop(home)
    with ExitStack() as stack:
        urls = {arm: stack.enter_context(echo_server("--token-delay", str(TOKEN_S),
                                                     "--slots", str(n)))
                for arm, n in SLOTS.items()}
        return [_sweep(i, args, tmp, urls, path, truth, None)
                for i in range(j, args.sweeps, args.jobs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=20)
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1, help="sweeps run at once")
    parser.add_argument("--restart", action="store_true",
                        help="restart the servers before each replicate (needs 6 or more)")
    args = parser.parse_args()
    truth = (true_capacity(6, TOKEN_S * TOKENS, LIMIT_S - TOKEN_S, ATTAINMENT)
             / true_capacity(4, TOKEN_S * TOKENS, LIMIT_S - TOKEN_S, ATTAINMENT))
    print(f"true ratio (M/D/c steady state) {truth:.4f}; {args.sweeps} sweeps x "
          f"{args.replicates} replicates{', restarted' if args.restart else ''}, "
          f"{args.jobs} at once", flush=True)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        hits = [h for hs in pool.map(lambda j: _job(j, args, Path(tmp), truth),
                                     range(args.jobs)) for h in hs if h is not None]
    if hits:
        print(f"coverage of the truth: {share(sum(hits), len(hits))} of {len(hits)} sweeps")


if __name__ == "__main__":
    main()
