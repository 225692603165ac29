"""`make validity`: regenerate the simulated figures of docs/VALIDITY.md from the
repository alone (seeded; the one real input, a real A/A run's per-request costs, is
committed as benchmarks/data/aa_costs.json with how it was recorded) and print each beside
the number the doc gives, with the regenerated share's exact 95 % interval; a doc number
outside it is marked DIFFERS. Figures measured on real engines cannot be regenerated here:
they are listed at the end as one-off measurements with their date and command.

    PYTHONPATH=. .venv/bin/python benchmarks/validity.py            # the doc's sizes (hours)
    PYTHONPATH=. .venv/bin/python benchmarks/validity.py --scale 0.1  # a tenth of the runs
    PYTHONPATH=. .venv/bin/python benchmarks/validity.py --only gate,offmodel

Sections and their time at the doc's sizes on the shared 2-core machine: gate 14 min,
offmodel and sequential ~30 min, watch ~25 min, spec ~5 min, accuracy ~10 min, family ~5
min, capacity (2000 sweeps a truth and table) 30-60 min, slots 1 min.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import accuracy_simulation as acc  # noqa: E402
import capacity_simulation as capsim  # noqa: E402
import family_simulation as fam  # noqa: E402
import gate_simulation as gate  # noqa: E402
import sequential_simulation as seq  # noqa: E402
import slots_truth  # noqa: E402
import spec_simulation as spec  # noqa: E402
import watch_validity as watch  # noqa: E402
from worlds import WORLDS  # noqa: E402

DOC = ROOT / "docs" / "VALIDITY.md"
GATE_TABLE = "| per-request noise σ"
OFF_TABLE = "| world (true process spread, per-request noise)"
SEQ_TABLE = "| world, sequential A/A streams of 400 requests"
# the gate table's columns: TPOT noise sigma (None: the committed run's own) and runs
GATE_COLUMNS = ((None, 800), (0.097, 400), (0.24, 400))
# gate table rows: (row label's start, [(experiment, method, key) per number in the cell])
_SHIP = "process+floor"
GATE_ROWS = (
    ("A/A, RER CI excludes 0: per-request", [("aa", "per-request", "ci excludes no change: rer")]),
    ("A/A, RER CI excludes 0: shipped", [("aa", _SHIP, "ci excludes no change: rer")]),
    ("A/A, decode RER / E2E / TTFT / TPOT", [
        ("aa", _SHIP, f"ci excludes no change: {f}") for f in
        ("rer_decode", "latency_ratio", "ttft_latency_ratio", "tpot_latency_ratio")]),
    ("A/A under `tight`, RER passes", [("aa", "per-request", "tight: rer pass"),
                                       ("aa", _SHIP, "tight: rer pass")]),
    ("A/A under `tight`, latency fails", [("aa", "per-request", "tight: latency_ratio fail"),
                                          ("aa", _SHIP, "tight: latency_ratio fail")]),
    ("true 15 % saving under `tight`", [("faster", _SHIP, "tight: rer pass")]),
    ("+20 % latency under `tight`", [("slow", _SHIP, "tight: latency_ratio fail")]),
    ("+20 % latency under `default`", [("slow", _SHIP, "default: latency_ratio fail")]),
)
OFF_FIGURES = ("rer", "rer_decode", "latency_ratio", "ttft_latency_ratio", "tpot_latency_ratio")
SEQ_KEYS = ("no-regression: latency_ratio", "tight: rer")
WATCH_TABLE = "| world, the watch's A/A rollouts"
WATCH_KEYS = ("any", "e2e_ratio", "ttft_ratio", "tpot_ratio", "verdict pass")
WATCH_ROLLOUTS = 300
SPEC_TABLE = "| requests | expanded percentile"
SPEC_EVEN_TABLE = "| requests, less varied acceptance"
ACC_TABLE = "| redraw | n | case |"
FAMILY_TABLE = "| experiment | families | measured | target |"
# capacity tables: (header, key cells, the simulation's arguments, sweeps, per row label's
# start: its truth; columns: (key, its index among the row's other cells))
CAP_TRUTHS = (("1.0", "aa"), ("1.2", "policy"), ("1.664", "slots"))
CAP_TABLES = (
    ("| truth | sweeps | coverage, across 8 restarted replicates", 1,
     ["--restart", "--seed", "11"], 2000, (("covered", 1), ("below", 2))),
    ("| truth | sweeps | coverage, across 8 replicates |", 2, ["--seed", "11"], 2000,
     (("covered", 1), ("below", 2), ("single", 4))),
    ("| truth | sweeps | coverage, across 8 replicates |", 2, ["--seed", "1"], 400,
     (("covered", 1), ("below", 2), ("single", 4))),
)
CAP_OFF_TABLE = "| truth | the same processes, t with τ = 0.02: coverage"
# the family table's rows: (label's start, the count, its denominator)
FAMILY_ROWS = (
    ("every candidate's true RER exactly at", "threshold", "any pass", None),
    ("three equal candidates", "equal", "recommended above", "recommended"),
    ("the same, the rule before", "equal", "own above", "old"),
    ("the same, the largest point, its interval at its Holm", "equal", "old above", "old"),
)
# numbers measured on real engines: not regenerable here (section, date, command)
ONE_OFFS = (
    ("Real runs under the shipped policies (50 runs, verdict counts, τ measured)",
     "before 2026-12-03, date not recorded",
     "benchmarks/gate_validity.py --experiments 'aa*2,faster,slow,static' --repeats 10 "
     "--max-tokens 16 --rate 0.5"),
    ("Per-request intervals alone (7 of 20 A/A runs)", "before 2026-12-03, date not recorded",
     "benchmarks/gate_validity.py (per-request bootstrap, before the process term)"),
    ("Accuracy, real runs (24 A/A, 12 planted, 10 greedy)", "2026-12-04",
     "benchmarks/accuracy_validity.py --aa 24 --planted 12 --greedy 10"),
    ("Capacity on real slot servers (20 sweeps of 3; 20 restarted sweeps of 6)",
     "2026-12-04 (restarted); the first date not recorded",
     "benchmarks/capacity_slots_real.py --sweeps 20 --replicates 3|6 --jobs 4 [--restart]"),
    ("vLLM as arms", "2026-12-04", "benchmarks/vllm_arms.py --requests 24 --max-tokens 16"),
    ("The embedded model, `make demo`", "2026-12-03", "make demo"),
    ("At scale", "date not recorded", "benchmarks/metrics_scale.py; replay_overhead.py"),
    ("Side by side with the peers", "2026-12-03", "make peers"),
    ("The gate simulation's inputs (one real A/A run)", "see benchmarks/data/aa_costs.json",
     "benchmarks/gate_validity.py --experiments aa --repeats 1 ...; --record-inputs"),
    ("The gate table before the committed inputs (VALIDITY.md, 'Simulated')",
     "before 2026-12-05", "benchmarks/gate_simulation.py --from-run runs/... (not kept)"),
    ("The plain percentile intervals the expanded ones replaced (METRICS.md 5.3-5.9 %; "
     "VALIDITY.md 'Speculative figures', its last column)", "2026-12-01 / 2026-12-04",
     "gate_simulation.py / spec_simulation.py at the commits before the expanded percentile"),
    ("Capacity: the per-request bootstrap one sweep had (33-40 %), --knee-steps 1, the "
     "t-interval on restarted replicates (98.9 %)", "2026-12-04",
     "benchmarks/capacity_simulation.py --sweeps 400|2000 [--knee-steps 1] [--restart]"),
    ("Sequential verdicts table (METRICS.md; VALIDITY.md 'Sequential verdicts')",
     "2026-12-01 to 2026-12-04", "benchmarks/sequential_simulation.py --runs 2000|300, "
     "before every arm had its own process"),
)
# held by the suite on every `make test`, not rerun here (what, the test)
HELD_BY_TESTS = (
    ("conversation bootstrap: per-request < 85 %, conversation >= 90 % (METRICS.md)",
     "tests/test_conversations.py"),
    ("sequential margins at the threshold, 300 streams each (METRICS.md)",
     "tests/test_gate_sequential.py"),
    ("the replicates' intervals off their model (METRICS.md, VALIDITY.md)",
     "tests/test_capacity_intervals.py"),
)


@dataclass(frozen=True)
class Row:
    what: str
    doc: float | None  # the doc's share, in %
    k: int
    n: int

    def line(self) -> str:
        low, high = gate.clopper_pearson(self.k, self.n)
        got = 100 * self.k / self.n
        if self.doc is None:
            mark = "not in the doc"
        else:
            mark = "agrees" if 100 * low - 0.05 <= self.doc <= 100 * high + 0.05 else "DIFFERS"
        doc = "—" if self.doc is None else f"{self.doc:.1f} %"
        return (f"  {self.what:<66} doc {doc:>7}   regenerated {got:5.1f} % "
                f"[{100 * low:.1f}, {100 * high:.1f}] ({self.k}/{self.n})  {mark}")


def doc_table(header: str, doc: Path = DOC) -> dict[str, list[str]]:
    """The markdown table starting with `header`: row label -> its other cells."""
    lines = doc.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    rows: dict[str, list[str]] = {}
    if start is None:
        return rows
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def doc_rows(header: str, key_cells: int, doc: Path = DOC) -> dict[str, list[str]]:
    """As `doc_table`, keyed by the first `key_cells` cells joined by " | "."""
    lines = doc.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(header)), None)
    rows: dict[str, list[str]] = {}
    if start is None:
        return rows
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[" | ".join(cells[:key_cells])] = cells[key_cells:]
    return rows


def doc_number(table: dict[str, list[str]], row: str, column: int, index: int
               ) -> float | None:
    """The `index`-th share (a number before % or /) in the cell of the row starting `row`."""
    label = next((k for k in table if k.startswith(row)), None)
    if label is None or column >= len(table[label]):
        return None
    found = re.findall(r"(\d+(?:\.\d+)?)\s*(?:%|/)", table[label][column])
    return float(found[index]) if index < len(found) else None


def gate_rows(scale: float) -> Iterator[Row]:
    table = doc_table(GATE_TABLE)
    committed = gate.committed_inputs()
    for column, (sigma, runs) in enumerate(GATE_COLUMNS):
        inputs = dict(committed)
        if sigma is not None:
            inputs["sigma_ttft"] *= sigma / inputs["sigma_tpot"]
            inputs["sigma_tpot"] = sigma
        n = max(20, round(runs * scale))
        counts = {e: gate.run_experiment(inputs, e, n) for e in gate.EXPERIMENTS}
        for label, parts in GATE_ROWS:
            for i, (experiment, method, key) in enumerate(parts):
                yield Row(f"σ {inputs['sigma_tpot']:.3f}: {label} [{i}]",
                          doc_number(table, label, column, i),
                          counts[experiment][method].get(key, 0), n)


def offmodel_rows(scale: float) -> Iterator[Row]:
    table = doc_table(OFF_TABLE)
    inputs = gate.committed_inputs()
    n = max(20, round(2000 * scale))
    for world in WORLDS.values():
        counts = gate.aa_exclusions(inputs, world, n)
        label = next((k for k in table if k.startswith(f"`{world.name}`")), f"`{world.name}`")
        for column, name in enumerate(OFF_FIGURES):
            yield Row(f"gate A/A, {world.name}: {name} excludes no change",
                      doc_number(table, label, column, 0), counts[name], n)


def sequential_rows(scale: float) -> Iterator[Row]:
    table = doc_table(SEQ_TABLE)
    n = max(20, round(400 * scale))
    for world in WORLDS.values():
        counts = seq.aa_exclusions(world, n)
        label = next((k for k in table if k.startswith(f"`{world.name}`")), f"`{world.name}`")
        for column, key in enumerate(SEQ_KEYS):
            yield Row(f"sequential A/A, {world.name}: {key} excludes the truth",
                      doc_number(table, label, column, 0), counts.get(key, 0), n)


def watch_rows(scale: float) -> Iterator[Row]:
    table = doc_table(WATCH_TABLE)
    n = max(20, round(WATCH_ROLLOUTS * scale))
    for world in WORLDS.values():
        for label, prior in ((f"`{world.name}`: term", None), (f"`{world.name}`: no term", 0.0)):
            if label not in table and prior is not None:
                continue  # the doc gives this world with the term only
            counts = watch.aa_exclusions(world, n, prior=prior)
            for column, key in enumerate(WATCH_KEYS):
                yield Row(f"watch A/A, {label.replace('`', '')}: {key}",
                          doc_number(table, label, column, 0), counts.get(key, 0), n)


def spec_rows(scale: float) -> Iterator[Row]:
    for header, argv in ((SPEC_TABLE, None), (SPEC_EVEN_TABLE, ["--a", "4", "--b", "4"])):
        table = doc_table(header)
        n = max(20, round(2000 * scale))
        for label in table:
            size = int(label.split()[0])
            counts = spec.coverage(size, n, argv)
            name = "spec_accept_length"
            what = f"spec{'' if argv is None else ' Beta(4, 4)'}, {size} requests: {name}"
            yield Row(f"{what} covers", doc_number(table, label, 0, 0),
                      counts[f"{name} covers"], n)
            if argv is None:
                yield Row(f"{what} lower end above", doc_number(table, label, 1, 0),
                          counts[f"{name} above"], n)


def accuracy_rows(scale: float) -> Iterator[Row]:
    table = doc_rows(ACC_TABLE, 3)
    n = max(20, round(2000 * scale))
    for label, cells in table.items():
        redraw, size, case = label.split(" | ")
        lost = 0.0 if case == "A/A" else float(case.split()[1]) / 100  # "planted 10 %"
        counts = acc.aa_exclusions(int(size), float(redraw), n, lost=lost)
        for column, key in enumerate(("excludes 0", "below -0.02", "mcnemar")):
            found = re.findall(r"^(\d+(?:\.\d+)?)", cells[column])
            yield Row(f"accuracy {case}, redraw {redraw}, n {size}: {key}",
                      100 * float(found[0]) if found else None, counts[key], n)


def family_rows(scale: float) -> Iterator[Row]:
    table = doc_table(FAMILY_TABLE)
    n = max(20, round(2000 * scale))
    counts = {label: fam.counts(label, n) for label in fam.EXPERIMENTS}
    for start, label, key, of in FAMILY_ROWS:
        c = counts[label]
        yield Row(f"family, {label}: {key}", doc_number(table, start, 1, 0), c[key],
                  n if of is None else max(c[of], 1))


def capacity_rows(scale: float) -> Iterator[Row]:
    for header, keys, argv, sweeps, columns in CAP_TABLES:
        table = doc_rows(header, keys)
        n = max(20, round(sweeps * scale))
        for start, label in CAP_TRUTHS:
            row = next((k for k in table if k.startswith(start) and
                        (keys == 1 or k.endswith(f"| {sweeps}"))), None)
            args = capsim.parse_args([*argv, "--sweeps", str(n)])
            c = capsim.truth_counts(label, args)
            for key, column in columns:
                doc = None if row is None else doc_number(table, row, column - keys + 1, 0)
                of = c["single_n"] if key == "single" else c["done"]
                yield Row(f"capacity {' '.join(argv)}, {sweeps} sweeps, {label}: {key}", doc,
                          c[key], max(of, 1))
    table = doc_table(CAP_OFF_TABLE)
    n = max(20, round(400 * scale))
    for start, label in CAP_TRUTHS:
        row = next((k for k in table if k.startswith(start)), None)
        for column, (argv, key) in enumerate(((["--process-sd", "0.04"], "covered"),
                                              (["--process-sd", "0.04"], "below"),
                                              (["--process-sd", "0.04", "--restart"], "covered"),
                                              (["--process-sd", "0.04", "--restart"], "below"))):
            if column % 2 == 0:
                c = capsim.truth_counts(label, capsim.parse_args([*argv, "--sweeps", str(n)]))
            yield Row(f"capacity processes 2x {' '.join(argv[2:])}, {label}: {key}",
                      None if row is None else doc_number(table, row, column, 0), c[key],
                      max(c["done"], 1))


def slots_rows(scale: float) -> Iterator[Row]:
    """Not a share: the truth's Monte Carlo error, and the close calls re-judged."""
    t = slots_truth.truth(max(4, round(40 * scale)))
    print(f"  slot servers' truth: {t.mean:.4f} (SE {t.se:.4f}, {t.seeds} streams); one "
          f"stream's Monte Carlo error {t.sd:.4f}; the doc's single-stream truth "
          f"{slots_truth.PUBLISHED}")
    for what, end, side in slots_truth.CLOSE_CALLS:
        print(f"    {what} {end}: {slots_truth.judged(t, end, side)}")
    return iter(())


SECTIONS: dict[str, tuple[str, Callable[[float], Iterator[Row]]]] = {
    "gate": ("Simulated: per-request against process-aware intervals "
             "(benchmarks/gate_simulation.py)", gate_rows),
    "offmodel": ("Off the model: the fixed gate's A/A exclusions per world", offmodel_rows),
    "sequential": ("Off the model: the sequential gate's A/A exclusions per world "
                   "(benchmarks/sequential_simulation.py --coverage)", sequential_rows),
    "watch": ("The watch's A/A rollouts per world, exclusions of the truth "
              "(benchmarks/watch_validity.py --coverage)", watch_rows),
    "spec": ("Speculative figures' coverage (benchmarks/spec_simulation.py, through "
             "compute_figures)", spec_rows),
    "accuracy": ("accuracy_delta, A/A and planted (benchmarks/accuracy_simulation.py, "
                 "through compute_figures)", accuracy_rows),
    "family": ("Several candidates (benchmarks/family_simulation.py)", family_rows),
    "capacity": ("Capacity across replicates (benchmarks/capacity_simulation.py)",
                 capacity_rows),
    "slots": ("The slot servers' truth (benchmarks/slots_truth.py)", slots_rows),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="runs per figure as a share of the doc's (0.1: quick, noisy)")
    parser.add_argument("--only", default=",".join(SECTIONS))
    args = parser.parse_args()
    differs = 0
    for key in args.only.split(","):
        title, rows = SECTIONS[key]
        started = time.monotonic()
        print(f"\n{title}", flush=True)
        for row in rows(args.scale):
            print(row.line(), flush=True)
            differs += "DIFFERS" in row.line()
        print(f"  ({time.monotonic() - started:.0f} s)", flush=True)
    print("\nOne-off measurements on real engines (not regenerated here):")
    for what, when, command in ONE_OFFS:
        print(f"  {what}: {when}; {command}")
    print("\nHeld by the suite, not rerun here:")
    for what, test in HELD_BY_TESTS:
        print(f"  {what}: {test}")
    print(f"\n{differs} regenerated figure(s) outside their doc number's agreement")


if __name__ == "__main__":
    main()
