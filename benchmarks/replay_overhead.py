"""What the shadow replayer costs: against the trivial echo server (started here), the
sustained paired request rate `run_replay` reaches with 1, 2 and 4 Locust worker processes,
the latency it adds per request (p50 and p99) compared with calling the server directly, and
the CPU time the replayer spends per arm-request (Locust's master and its workers apart, each
as the process counts its own, the arms excluded; and this process, which follows the
store), at the margin: a full and a short replay, the difference over the arm-requests
between them — side by side, in one run. One level of users (--flood-users, a closed loop with
no think time) is not bound by the echo server's latency, so the replayer's own ceiling
shows there.

    .venv/bin/python benchmarks/replay_overhead.py [--requests 300] [--users 1,16]
        [--processes 1,2,4] [--tokens 16] [--echo-processes 4] [--flood-users 64]
        [--repeats 3]

"paired" = one traffic record sent to both arms (baseline and candidate, both the echo
server). Direct rows call the server with the same `client.send` (httpx transport) from a
thread pool of the same size; the replay sends with it too (gevent transport, under Locust
workers fed by Locust's master over its messages), so the difference is Locust + gevent +
scheduling + the master/worker channel + the store. The echo server runs several processes
so that it is not the limit; a replay row whose rate reaches 80% of the direct rate at the
same concurrency is flagged `server?` (the server, or the machine's cores, may be what
limits it, not the replayer).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's rigs

from layergate.exporters.traffic import TrafficRecord, read_traffic, write_traffic  # noqa: E402
from layergate.harness.processes import free_port  # noqa: E402
from layergate.harness.replay import ReplayConfig, run_replay  # noqa: E402
from layergate.harness.replay.client import Target, send  # noqa: E402
from layergate.harness.replay.httpx_transport import HttpxTransport  # noqa: E402
from layergate.harness.rundir import RunDir  # noqa: E402
from layergate.harness.scenarios import SCENARIOS_DIR  # noqa: E402
from tests.support.echo import start_echo  # noqa: E402
from tests.support.locust_probe import Probe, probed  # noqa: E402

HERE = Path(__file__).resolve().parent


def make_traffic(path: Path, n: int, tokens: int) -> list[TrafficRecord]:
    source = read_traffic(SCENARIOS_DIR / "traffic" / "eval.jsonl").records
    records = [TrafficRecord(f"b-{i:05d}", 0.0, r.scenario, r.endpoint,
                             {**r.body, "max_tokens": tokens})
               for i, r in enumerate(source[i % len(source)] for i in range(n))]
    write_traffic(path, records)
    return records


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def direct(url: str, records: list[TrafficRecord], users: int) -> tuple[float, list[float]]:
    """Paired rate and per-request E2E when each record goes straight to both 'arms', with
    2 x users requests in flight, as the replayer has (each user sends to both arms)."""
    transport = HttpxTransport(max_connections=users * 2)

    def one(job: tuple[TrafficRecord, str]) -> float:
        r = send(transport, Target(job[1], url), job[0], intended=time.perf_counter(),
                 timeout=30)
        if not r.ok:
            raise RuntimeError(r.error)
        return r.e2e_s

    jobs = [(r, arm) for r in records for arm in ("baseline", "candidate")]
    start = time.perf_counter()
    try:
        with ThreadPoolExecutor(users * 2) as pool:
            e2e = list(pool.map(one, jobs))
    finally:
        transport.close()
    return len(records) / (time.perf_counter() - start), e2e


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def replayed(url: str, traffic: Path, out: Path, users: int, processes: int,
             probe: Probe) -> tuple[float, list[float], float, float, float, float]:
    """Paired rate (first intended send to last result), per-request E2E, wall time, and
    the CPU seconds of Locust's master, of its workers (each as the process counted its
    own, `tests.support.locust_probe`) and of this process (which prepares the run and follows the
    store)."""
    start = time.perf_counter()
    mine = cpu_s()
    run_replay(ReplayConfig(out=out, arms={"baseline": url, "candidate": url}, traffic=traffic,
                            users=users, processes=processes, progress=False, timeout=30))
    wall = time.perf_counter() - start
    mine = cpu_s() - mine
    locust = probe.take()
    if locust.processes != processes + 1:
        raise RuntimeError(f"{locust.processes} of {processes + 1} Locust processes "
                           "reported their CPU")
    run_dir = RunDir(out)
    run = run_dir.load()
    if run.manifest.status != "complete" or not all(r.ok for r in run.results):
        raise RuntimeError(f"replay run {out} is not clean: {run.manifest.counts}")
    with run_dir.open_store(create=False) as store:
        rows = store.rows()
    first = min(r.intended_at for r in rows)
    last = max(r.recorded_at for r in rows)
    return len(run.traffic) / (last - first), [r.e2e_s for r in run.results], wall, \
        locust.master, locust.workers, mine


def replay_row(url: str, traffic: Path, short: Path, tmp: Path, users: int, processes: int,
               repeats: int, probe: Probe) -> tuple:
    """Medians over `repeats` of the full replay's rate and wall time, and the CPU per
    arm-request at the margin (master, workers, this process): (CPU of the full traffic -
    CPU of the short one) / the arm-requests between them, so Locust's start (imports,
    spawning) is not counted."""
    full, part = len(read_traffic(traffic)), len(read_traffic(short))
    runs, margins = [], []
    for k in range(repeats):
        runs.append(replayed(url, traffic, tmp / f"run-{users}-{processes}-{k}", users,
                             processes, probe))
        small = replayed(url, short, tmp / f"short-{users}-{processes}-{k}", users, processes,
                         probe)
        margins.append([(runs[-1][j] - small[j]) / (2 * (full - part)) for j in (3, 4, 5)])
    return (statistics.median(r[0] for r in runs), runs[0][1],
            statistics.median(r[2] for r in runs),
            *(statistics.median(m[j] for m in margins) for j in range(3)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--users", default="1,16", help="concurrency levels, e.g. 1,16")
    parser.add_argument("--processes", default="1,2,4", help="Locust worker processes to try")
    parser.add_argument("--tokens", type=int, default=16, help="max_tokens per request")
    parser.add_argument("--echo-processes", type=int, default=4,
                        help="echo server processes (enough that it is not the limit)")
    parser.add_argument("--flood-users", type=int, default=64,
                        help="users of the row not bound by latency (closed loop, no think "
                             "time: each user sends again as soon as it has its answers)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per replay row; the medians are printed (a shared "
                             "machine is noisy)")
    args = parser.parse_args()
    echo = start_echo(free_port(), "--processes", str(args.echo_processes))
    url = echo.url
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp, probed() as probe:
            traffic = Path(tmp) / "traffic.jsonl"
            records = make_traffic(traffic, args.requests, args.tokens)
            short = Path(tmp) / "short.jsonl"
            make_traffic(short, max(args.requests // 5, 1), args.tokens)
            levels = [int(u) for u in args.users.split(",")] + [args.flood_users]
            for users in levels:
                rate, e2e = direct(url, records, users)
                rows.append(("direct httpx", users, 1, rate, e2e, None, None, None, None))
                for processes in (int(p) for p in args.processes.split(",")):
                    if processes > users:
                        continue
                    rate, e2e, wall, master, workers, parent = replay_row(
                        url, traffic, short, Path(tmp), users, processes, args.repeats, probe)
                    rows.append(("layergate replay", users, processes, rate, e2e, wall,
                                 master, workers, parent))
    finally:
        echo.stop(10)
    print(f"\n{args.requests} records x 2 arms, {args.tokens} streamed tokens each, "
          f"echo server at {url} ({args.echo_processes} processes), {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; replay rows: medians of {args.repeats} runs; CPU per "
          f"arm-request at the margin ({args.requests} against {max(args.requests // 5, 1)} "
          "records, so Locust's start is not counted)")
    direct_rate = {u: rate for n, u, _, rate, *_ in rows if n == "direct httpx"}
    print(f"{'path':<18}{'users':>6}{'procs':>6}{'paired/s':>10}{'E2E p50 ms':>12}"
          f"{'E2E p99 ms':>12}{'wall s':>8}  {'CPU ms/arm-req:':<16}{'master':>7}{'workers':>8}"
          f"{'both':>7}{'+follower':>10}  limit")
    for name, users, procs, rate, e2e, wall, master, workers, parent in rows:
        flag = "server?" if name != "direct httpx" and rate >= 0.8 * direct_rate[users] else ""
        cpu = "" if master is None else \
            f"{master * 1e3:>7.3f}{workers * 1e3:>8.3f}{(master + workers) * 1e3:>7.3f}" \
            f"{parent * 1e3:>10.3f}"
        print(f"{name:<18}{users:>6}{procs:>6}{rate:>10.1f}{statistics.median(e2e) * 1e3:>12.2f}"
              f"{pct(e2e, 0.99) * 1e3:>12.2f}{'' if wall is None else f'{wall:.1f}':>8}"
              f"  {'':<16}{cpu:<32}  {flag}")
    base = {u: e for n, u, _, _, e, *_ in rows if n == "direct httpx"}
    for name, users, procs, _, e2e, *_ in rows:
        if name != "direct httpx":
            p50 = (statistics.median(e2e) - statistics.median(base[users])) * 1e3
            p99 = (pct(e2e, 0.99) - pct(base[users], 0.99)) * 1e3
            print(f"added latency users={users} worker processes={procs}: "
                  f"p50 {p50:+.2f} ms, p99 {p99:+.2f} ms")


if __name__ == "__main__":
    main()
