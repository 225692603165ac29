"""Where the replayer's own CPU goes: one replay against the echo server (closed loop,
zero think time) with every Locust process, master and workers, under cProfile (timed in
CPU seconds), then the top functions of each by own time. The arms are not profiled.

    PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/replay_profile.py [--requests 2000]
        [--users 64] [--processes 1] [--tokens 16] [--top 30] [--out DIR]

Each profile stays in DIR as `<role>-<pid>.prof` (for `python -m pstats`).
"""

from __future__ import annotations

import argparse
import pstats
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's rigs

from replay_overhead import make_traffic  # noqa: E402

from layergate.harness.processes import free_port  # noqa: E402
from layergate.harness.replay import ReplayConfig, run_replay  # noqa: E402
from tests.support.echo import start_echo  # noqa: E402
from tests.support.locust_probe import probed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None, help="where the profiles stay")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="layergate-profile-"))
    echo = start_echo(free_port(), "--processes", "2")
    try:
        with tempfile.TemporaryDirectory() as tmp, probed(profile=True, out=out) as probe:
            traffic = Path(tmp) / "traffic.jsonl"
            make_traffic(traffic, args.requests, args.tokens)
            run_replay(ReplayConfig(out=Path(tmp) / "run", arms={"baseline": echo.url,
                                                                  "candidate": echo.url},
                                    traffic=traffic, users=args.users,
                                    processes=args.processes, progress=False, timeout=30))
            cpu = probe.take()
    finally:
        echo.stop(10)
    arm_requests = 2 * args.requests
    print(f"CPU (profiled, so inflated) per arm-request over {arm_requests}, start included: "
          f"master {cpu.master / arm_requests * 1e3:.3f} ms, "
          f"workers {cpu.workers / arm_requests * 1e3:.3f} ms")
    for path in probe.profiles():
        print(f"\n=== {path}", flush=True)
        pstats.Stats(str(path), stream=sys.stdout).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
