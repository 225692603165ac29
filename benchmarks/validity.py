"""`make validity`: regenerate the simulated figures of docs/VALIDITY.md from the
repository alone (seeded; the one real input, a real A/A run's per-request costs, is
committed as benchmarks/data/aa_costs.json with how it was recorded) and print each beside
the number the doc gives, with the regenerated share's exact 95 % interval; a doc number
outside it is marked DIFFERS. Figures measured on real engines cannot be regenerated here:
they are listed at the end as one-off measurements with their date and command.

    PYTHONPATH=. .venv/bin/python benchmarks/validity.py            # the doc's sizes (~30 min)
    PYTHONPATH=. .venv/bin/python benchmarks/validity.py --scale 0.1  # a tenth of the runs
    PYTHONPATH=. .venv/bin/python benchmarks/validity.py --only gate,offmodel
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

import gate_simulation as gate  # noqa: E402
import sequential_simulation as seq  # noqa: E402
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


SECTIONS: dict[str, tuple[str, Callable[[float], Iterator[Row]]]] = {
    "gate": ("Simulated: per-request against process-aware intervals "
             "(benchmarks/gate_simulation.py)", gate_rows),
    "offmodel": ("Off the model: the fixed gate's A/A exclusions per world", offmodel_rows),
    "sequential": ("Off the model: the sequential gate's A/A exclusions per world "
                   "(benchmarks/sequential_simulation.py --coverage)", sequential_rows),
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
    print(f"\n{differs} regenerated figure(s) outside their doc number's agreement")


if __name__ == "__main__":
    main()
