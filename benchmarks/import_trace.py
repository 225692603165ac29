"""What importing a large length-only trace costs: a trace of --rows rows (default 1 M) is
written in the public format's own fields, then `layergate import-trace` runs on it in a
child process, and its wall time and peak resident memory are printed side by side with
the budget (60 s, 2 GB).

    .venv/bin/python benchmarks/import_trace.py [--rows 1000000] [--format azure|burstgpt|mooncake]
        [--median-input 1000] [--tokenizer PATH]

The rows arrive every 10 ms on average (Poisson), prompt lengths are log-normal with median
--median-input tokens (sigma 0.8, at most 8192; the scale of the Azure 2023 conversation
trace), outputs log-normal with median 200. mooncake rows get hash ids of 512-token blocks,
each sharing its first blocks with one of 1,000 earlier "sessions" (the trace's reuse).
The traffic file goes to a temporary directory and is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BUDGET_S, BUDGET_BYTES = 60.0, 2 * 1024**3


def write_trace(path: Path, fmt: str, rows: int, median_input: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    at = np.cumsum(rng.exponential(0.010, rows))
    inputs = np.clip(rng.lognormal(np.log(median_input), 0.8, rows), 1, 8192).astype(int)
    outputs = np.clip(rng.lognormal(np.log(200), 0.8, rows), 1, 4096).astype(int)
    with path.open("w") as fh:
        if fmt == "azure":
            fh.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
            base = np.datetime64("2023-11-16T18:15:46")
            stamps = (base + (at * 1e6).astype("timedelta64[us]")).astype(str)
            fh.writelines(f"{s.replace('T', ' ')},{n},{o}\n"
                          for s, n, o in zip(stamps, inputs, outputs, strict=True))
        elif fmt == "burstgpt":
            fh.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
            fh.writelines(f"{t:.3f},ChatGPT,{n},{o},{n + o},Conversation log\n"
                          for t, n, o in zip(at, inputs, outputs, strict=True))
        else:
            sessions = rng.integers(0, 1000, rows)
            shared = rng.integers(0, 3, rows)  # leading blocks shared with the session
            fresh = 1_000_000
            for t, n, o, s, k in zip(at, inputs, outputs, sessions, shared, strict=True):
                blocks = -(-int(n) // 512)
                ids = [int(s) * 4 + i for i in range(min(int(k), blocks))]
                ids += range(fresh, fresh + blocks - len(ids))
                fresh += blocks - len(ids)
                fh.write(json.dumps({"timestamp": int(t * 1000), "input_length": int(n),
                                     "output_length": int(o), "hash_ids": ids}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--format", default="azure", choices=("azure", "burstgpt", "mooncake"))
    parser.add_argument("--median-input", type=int, default=1000)
    parser.add_argument("--tokenizer", help="default: the embedded model's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="layergate-import-") as tmp:
        trace = Path(tmp) / f"trace.{'jsonl' if args.format == 'mooncake' else 'csv'}"
        started = time.perf_counter()
        write_trace(trace, args.format, args.rows, args.median_input)
        print(f"trace: {args.rows} {args.format} rows, {trace.stat().st_size / 1e6:.0f} MB, "
              f"written in {time.perf_counter() - started:.1f} s", flush=True)
        out = Path(tmp) / "traffic.jsonl"
        cmd = [sys.executable, "-m", "layergate", "import-trace", "--format", args.format,
               str(trace), "--out", str(out), *(["--tokenizer", args.tokenizer]
                                                if args.tokenizer else [])]
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=os.environ)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"import-trace failed ({done.returncode}):\n{done.stderr}")
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak = usage.ru_maxrss * 1024  # KiB on Linux
        cpu = usage.ru_utime + usage.ru_stime
        size = out.stat().st_size
        print(done.stdout.strip())
        print(f"{'':<22}{'measured':>14}{'budget':>12}")
        print(f"{'wall time':<22}{wall:>12.1f} s{BUDGET_S:>10.0f} s"
              f"  {'ok' if wall <= BUDGET_S else 'OVER'}")
        print(f"{'CPU time (user+sys)':<22}{cpu:>12.1f} s{'':>12}  (load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores while it ran)")
        print(f"{'peak RSS':<22}{peak / 2**20:>11.0f} MB{BUDGET_BYTES / 2**20:>9.0f} MB"
              f"  {'ok' if peak < BUDGET_BYTES else 'OVER'}")
        print(f"{'traffic written':<22}{size / 1e9:>11.2f} GB  ({size / wall / 1e6:.0f} MB/s, "
              f"{args.rows / wall:,.0f} rows/s)")


if __name__ == "__main__":
    main()
