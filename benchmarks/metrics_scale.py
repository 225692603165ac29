"""How long `layergate metrics RUN` takes, and its peak memory, for 10 k, 100 k and 1 M paired
requests x 3 arms.

Writes a synthetic run directory of N paired requests through the real store (manifest,
traffic, results.sqlite, cache-hit scrapes): three arms (baseline, baseline2, candidate),
three scenarios, streamed timings with inter-token gaps, token ids, texts that mostly
agree, the `layergate` extension. Then runs `layergate metrics RUN --json` as the CLI runs
it, in its own process, and reads that process's wall time and peak RSS. Prints one line
per size, measured here:

    .venv/bin/python benchmarks/metrics_scale.py [--sizes 10000,100000,1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rigs.synthetic_run import write_run

from exporters.config import MetricsConfig
from harness.rundir import RunDir


def measure(run: RunDir, out: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of `layergate metrics RUN --json OUT` in its own process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "metrics", str(run.path),
                             "--json", str(out)], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"layergate metrics exited with {os.waitstatus_to_exitcode(status)}")
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--keep", type=Path, help="Write the run directories here and keep "
                                                   "them (default: a temporary directory).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for n in (int(s) for s in args.sizes.split(",")):
            path = root / f"run-{n}"
            start = time.perf_counter()
            kept = (path / "manifest.json").is_file()  # from an earlier --keep
            run = RunDir(path) if kept else write_run(path, n)
            wrote = "kept" if kept else f"written in {time.perf_counter() - start:.0f} s"
            out = root / f"figures-{n}.json"
            took, cpu, peak = measure(run, out)
            figures = json.loads(out.read_text())["figures"]
            rer = next(f for f in figures if f["name"] == "rer" and f["scenario"] == "all"
                       and f["arm"] == "candidate")
            size = run.results_path.stat().st_size / 2**20
            print(f"{n:>9} paired requests x 3 arms (store {size:.0f} MiB, {wrote}): "
                  f"`layergate metrics` {len(figures)} figures in {took:6.2f} s "
                  f"(CPU {cpu:6.2f} s, load {os.getloadavg()[0]:.1f}) "
                  f"({MetricsConfig().n_resamples} resamples; rer {rer['value']:.3f} "
                  f"[{rer['ci_low']:.3f}, {rer['ci_high']:.3f}]; peak RSS {peak:.0f} MiB)",
                  flush=True)


if __name__ == "__main__":
    main()
