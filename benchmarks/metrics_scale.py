"""How long `layergate metrics RUN` and `layergate gate RUN` take, and their peak memory,
for 10 k, 100 k and 1 M paired requests x 3 arms.

Writes a synthetic run directory of N paired requests through the real store (manifest,
traffic, results.sqlite, cache-hit scrapes): three arms (baseline, baseline2, candidate),
three scenarios, streamed timings with inter-token gaps, token ids, texts that mostly
agree, the `layergate` extension. Then runs `layergate metrics RUN --json` and `layergate
gate RUN --json` as the CLI runs them, each in its own process (with its bytecode cached,
as an installed wheel has it), and reads that process's wall time, CPU time and peak RSS.
Prints one line per command and size, measured here:

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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's rigs

from layergate.exporters.figures.config import MetricsConfig  # noqa: E402
from layergate.harness.rundir import RunDir  # noqa: E402
from tests.support.synthetic_run import write_run  # noqa: E402

# exit codes that mean the command did its work (the gate's verdict is any of these)
DONE = {"metrics": {0}, "gate": {0, 1, 3}}


def measure(command: str, run: RunDir, out: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of `layergate COMMAND RUN --json OUT` in its own
    process."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "layergate.harness.cli", command, str(run.path),
                             "--json", str(out)], stdout=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in DONE[command]:
        raise SystemExit(f"layergate {command} exited with {code}")
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
            size = run.results_path.stat().st_size / 2**20
            for command in DONE:
                out = root / f"{command}-{n}.json"
                took, cpu, peak = measure(command, run, out)
                report = json.loads(out.read_text())
                what = f"{len(report['figures'])} figures" if command == "metrics" else \
                    f"verdict {report['verdict']}"
                print(f"{n:>9} paired requests x 3 arms (store {size:.0f} MiB, {wrote}): "
                      f"`layergate {command}` {what} in {took:6.2f} s "
                      f"(CPU {cpu:6.2f} s, load {os.getloadavg()[0]:.1f}) "
                      f"({MetricsConfig().n_resamples} resamples; {_rer(report)}; "
                      f"peak RSS {peak:.0f} MiB)", flush=True)


def _rer(report: dict) -> str:
    """The candidate's run-wide RER with its interval, from either command's JSON."""
    rer = report["metrics"]["rer"] if "metrics" in report else next(
        f for f in report["figures"] if f["name"] == "rer" and f["scenario"] == "all"
        and f["arm"] == "candidate")
    return f"rer {rer['value']:.3f} [{rer['ci_low']:.3f}, {rer['ci_high']:.3f}]"


if __name__ == "__main__":
    main()
