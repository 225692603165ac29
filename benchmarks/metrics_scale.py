"""How long `layergate metrics RUN` and `layergate gate RUN` take, and their peak memory,
for 10 k, 100 k and 1 M paired requests x 3 arms, and whether their figures equal the
in-memory path's.

Writes a synthetic run directory of N paired requests through the real store (manifest,
traffic, results.sqlite, cache-hit scrapes): three arms (baseline, baseline2, candidate),
three scenarios, streamed timings with inter-token gaps, token ids, texts that mostly
agree, the `layergate` extension. Then runs `layergate metrics RUN --json` and `layergate
gate RUN --json` as the CLI runs them, each in its own process (with its bytecode cached,
as an installed wheel has it), and reads that process's wall time, CPU time and peak RSS.
Then computes the figures of the same records in memory (`compute_figures` on the columns
`from_results` makes of them, never read from the store) with each command's settings, and
compares every value, interval, noise floor and count of each command's JSON with them.
Prints one line per command and size, and one per comparison, measured here:

    .venv/bin/python benchmarks/metrics_scale.py [--sizes 10000,100000,1000000] [--keep DIR]
        [--no-check]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's rigs

from layergate.exporters.figures import Figure  # noqa: E402
from layergate.exporters.figures.accuracy import read_references, read_verdicts  # noqa: E402
from layergate.exporters.figures.columns import ResultColumns, concat, from_results  # noqa: E402
from layergate.exporters.figures.compute import compute_figures  # noqa: E402
from layergate.exporters.figures.config import MetricsConfig  # noqa: E402
from layergate.exporters.figures.conversations import conversations, turn_positions  # noqa: E402
from layergate.exporters.records import ArmResult  # noqa: E402
from layergate.harness.gate import load_policy  # noqa: E402
from layergate.harness.gate.fixed.evaluation import metrics_config  # noqa: E402
from layergate.harness.gate.fixed.run_view import view_config  # noqa: E402
from layergate.harness.rundir import TRAFFIC, Run, RunDir, load_run  # noqa: E402
from tests.support.synthetic_run import BATCH, synthetic, write_run  # noqa: E402

# exit codes that mean the command did its work (the gate's verdict is any of these)
DONE = {"metrics": {0}, "gate": {0, 1, 3}}
# the numbers of a figure the commands' JSON carries, compared
COMPARED = ("value", "ci_low", "ci_high", "noise_floor", "n")


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
    parser.add_argument("--no-check", dest="check", action="store_false",
                        help="Time the commands only; do not compare with the in-memory path.")
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
            reports = {}
            for command in DONE:
                out = root / f"{command}-{n}.json"
                took, cpu, peak = measure(command, run, out)
                reports[command] = report = json.loads(out.read_text())
                what = f"{len(report['figures'])} figures" if command == "metrics" else \
                    f"verdict {report['verdict']}"
                print(f"{n:>9} paired requests x 3 arms (store {size:.0f} MiB, {wrote}): "
                      f"`layergate {command}` {what} in {took:6.2f} s "
                      f"(CPU {cpu:6.2f} s, load {os.getloadavg()[0]:.1f}) "
                      f"({MetricsConfig().n_resamples} resamples; {_rer(report)}; "
                      f"peak RSS {peak:.0f} MiB)", flush=True)
            if args.check:
                check(load_run(path), n, reports)


def check(run: Run, n: int, reports: dict[str, dict]) -> None:
    """Print whether each command's figures equal those computed in memory from the same
    records, with that command's settings."""
    start = time.perf_counter()
    columns = in_memory_columns(n)
    settings = {"metrics": view_config(run, None, {}),
                "gate": metrics_config(load_policy(None), run)}
    computed: list[tuple[MetricsConfig, list[Figure]]] = []  # once per distinct settings
    for command, config in settings.items():
        figures = next((f for c, f in computed if c == config), None)
        if figures is None:
            figures = in_memory_figures(run, columns, config)
            computed.append((config, figures))
        want = {(f.name, f.arm, f.scenario): _as_json(f) for f in figures}
        got = list(_reported(command, reports[command]))
        unmatched = [key for key, _ in got if key not in want]
        compared = [(key, entry) for key, entry in got if key in want]
        # the gate's JSON leaves out what its rule does not judge (an interval of a count)
        numbers = [(key, field, entry[field]) for key, entry in compared for field in COMPARED
                   if command == "metrics" or entry.get(field) is not None]
        differ = [(key, field, got_value, want[key][field])
                  for key, field, got_value in numbers if got_value != want[key][field]]
        worst = max((_relative(a, b) for *_, a, b in differ), default=0.0)
        verdict = "equal" if not differ else \
            f"{len(differ)} numbers differ (largest relative difference {worst:.1e}): " + \
            "; ".join(f"{k[0]}/{k[1]}/{k[2]} {f} {a!r} vs {b!r}" for k, f, a, b in differ[:3])
        names = ", ".join(sorted({k[0] for k in unmatched}))
        print(f"{n:>9} paired requests x 3 arms: `layergate {command}` figures vs the "
              f"in-memory path: {len(compared)} figures ({len(numbers)} numbers) {verdict}"
              + (f"; {len(unmatched)} entries of no figure ({names})" if unmatched else "")
              + f" (in-memory path {time.perf_counter() - start:.0f} s)", flush=True)


def in_memory_columns(n: int) -> ResultColumns:
    """The records `write_run` writes, as `from_results` makes them in memory, a batch at a
    time (a million records at once would take GBs); each row's outputs are those of the
    first record with the same outputs (the synthetic records share a few thousand)."""
    firsts: dict[tuple, int] = {}
    shown: list[ArmResult] = []
    which: list[np.ndarray] = []
    parts = []
    for batch in _batches(synthetic(n)):
        keys = [(r.output_text, r.token_ids, repr(r.top_logprobs), r.answer, r.tool_calls)
                for r in batch]
        for key, r in zip(keys, batch, strict=True):
            if key not in firsts:
                firsts[key] = len(shown)
                shown.append(r)
        which.append(np.array([firsts[k] for k in keys], dtype=np.int64))
        parts.append(dataclasses.replace(from_results(batch), outputs=_none))
    rows = np.concatenate(which)
    return dataclasses.replace(concat(parts), outputs=lambda idx: [
        shown[i] for i in rows[np.asarray(idx, dtype=np.int64)]])


def _none(idx: np.ndarray) -> list:
    raise AssertionError("a batch's outputs are read from the whole run's")


def _batches(results: Iterator[ArmResult]) -> Iterator[list[ArmResult]]:
    batch: list[ArmResult] = []
    for r in results:
        batch.append(r)
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def in_memory_figures(run: Run, columns: ResultColumns, config: MetricsConfig) -> list[Figure]:
    """`compute_figures` on `columns` with what the commands give it besides the run's rows
    (harness/gate/evaluation.run_figures): its scrapes, traffic offsets, conversations,
    references and repeat suite."""
    traffic = run.path / TRAFFIC
    clusters = conversations(traffic)
    references = read_references(traffic)
    return compute_figures(columns, run.scrapes, determinism=run.repeated(), config=config,
                           offsets=run.schedule.offsets,
                           max_in_flight=run.manifest.in_flight_limit, clusters=clusters,
                           references=references,
                           verdicts=read_verdicts(run.path) if references else None,
                           positions=turn_positions(traffic) if clusters else None)


def _as_json(figure: Figure) -> dict:
    """The figure as the commands write it (json, NumPy numbers as floats)."""
    return json.loads(json.dumps(dataclasses.asdict(figure), default=float))


def _reported(command: str, report: dict) -> Iterator[tuple[tuple[str, str, str], dict]]:
    """((name, arm, scenario), its numbers) of each figure in a command's JSON."""
    if command == "metrics":
        yield from (((f["name"], f["arm"], f["scenario"]), f) for f in report["figures"])
        return
    for scenario, checks in (("all", report["metrics"]), *report["scenarios"].items()):
        for key, entry in checks.items():
            yield (key.split(".")[0], entry.get("arm"), scenario), entry


def _relative(a: object, b: object) -> float:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) / max(abs(a), abs(b), 1e-300)
    return math.inf


def _rer(report: dict) -> str:
    """The candidate's run-wide RER with its interval, from either command's JSON."""
    rer = report["metrics"]["rer"] if "metrics" in report else next(
        f for f in report["figures"] if f["name"] == "rer" and f["scenario"] == "all"
        and f["arm"] == "candidate")
    return f"rer {rer['value']:.3f} [{rer['ci_low']:.3f}, {rer['ci_high']:.3f}]"


if __name__ == "__main__":
    main()
