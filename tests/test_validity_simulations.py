"""The simulated coverage figures of docs/VALIDITY.md held by the suite: a reduced run of
each simulation (`benchmarks/validity.py` regenerates them at the doc's size) through the
code a run uses, its count asserted within a binomial tolerance of the doc's own number.

The tolerance: the doc's share is known to its exact 99.95 % interval (from the runs the doc
names), and a count of `n` fresh runs at a rate inside it lands outside [ppf(0.00025),
isf(0.00025)] with probability below 0.0005: a correct calculator fails with probability
below 1e-3. Seeded, so a pass repeats; a changed calculator that moves a rate fails."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from scipy.stats import beta, binom

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gate_simulation as gate  # noqa: E402
import sequential_simulation as seq  # noqa: E402
import validity  # noqa: E402
from worlds import WORLDS  # noqa: E402

pytestmark = pytest.mark.slow


def tolerance(doc_percent: float, doc_n: int, n: int) -> tuple[int, int]:
    """The counts of `n` runs consistent with a doc share measured over `doc_n` runs."""
    k = round(doc_percent / 100 * doc_n)
    low = 0.0 if k == 0 else float(beta.ppf(0.00025, k, doc_n - k + 1))
    high = 1.0 if k == doc_n else float(beta.ppf(0.99975, k + 1, doc_n - k))
    return int(binom.ppf(0.00025, n, low)), int(binom.isf(0.00025, n, high))


def test_the_tolerance_can_fail() -> None:
    lo, hi = tolerance(4.0, 2000, 300)
    assert lo <= 12 <= hi < 45  # a calibrated 4 % passes, a 15 % (45 of 300) would not


@pytest.mark.parametrize("world", ["prior", "tau-2x"])
def test_gate_aa_exclusions_per_world_match_the_doc(world: str) -> None:
    table = validity.doc_table(validity.OFF_TABLE)
    label = next(k for k in table if k.startswith(f"`{world}`"))
    counts = gate.aa_exclusions(gate.committed_inputs(), WORLDS[world], 300, resamples=400,
                                seed=11)
    for column, name in enumerate(validity.OFF_FIGURES):
        doc = validity.doc_number(table, label, column, 0)
        lo, hi = tolerance(doc, 2000, 300)
        assert lo <= counts[name] <= hi, (world, name, counts[name], doc, (lo, hi))


@pytest.mark.parametrize("world", ["prior", "tau-2x"])
def test_sequential_aa_exclusions_per_world_match_the_doc(world: str) -> None:
    table = validity.doc_table(validity.SEQ_TABLE)
    label = next(k for k in table if k.startswith(f"`{world}`"))
    counts = seq.aa_exclusions(WORLDS[world], 25, seed=11)
    for column, key in enumerate(validity.SEQ_KEYS):
        doc = validity.doc_number(table, label, column, 0)
        lo, hi = tolerance(doc, 60, 25)
        assert lo <= counts.get(key, 0) <= hi, (world, key, counts.get(key, 0), doc, (lo, hi))
