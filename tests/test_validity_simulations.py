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

import accuracy_simulation as acc  # noqa: E402
import capacity_simulation as capsim  # noqa: E402
import family_simulation as fam  # noqa: E402
import gate_simulation as gate  # noqa: E402
import sequential_simulation as seq  # noqa: E402
import spec_simulation as spec  # noqa: E402
import validity  # noqa: E402
import watch_validity as watch  # noqa: E402
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


@pytest.mark.parametrize("world", ["prior", "tau-2x"])
def test_watch_aa_exclusions_per_world_match_the_doc(world: str) -> None:
    """The watch with its between-process term (the rows "`W`: term"), 40 rollouts."""
    table = validity.doc_table(validity.WATCH_TABLE)
    label = f"`{world}`: term"
    counts = watch.aa_exclusions(WORLDS[world], 40, seed=11)
    for column, key in enumerate(validity.WATCH_KEYS):
        doc = validity.doc_number(table, label, column, 0)
        lo, hi = tolerance(doc, validity.WATCH_ROLLOUTS, 40)
        assert lo <= counts.get(key, 0) <= hi, (world, key, counts.get(key, 0), doc, (lo, hi))


def test_watch_without_the_term_fails_the_docs_tolerance() -> None:
    """The guard can fail: the watch before its process term excludes the truth far more
    often than the doc's row with the term allows."""
    table = validity.doc_table(validity.WATCH_TABLE)
    doc = validity.doc_number(table, "`prior`: term", 0, 0)
    counts = watch.aa_exclusions(WORLDS["prior"], 40, seed=11, prior=0.0)
    assert counts["any"] > tolerance(doc, validity.WATCH_ROLLOUTS, 40)[1]


def test_accuracy_aa_exclusions_match_the_doc() -> None:
    """accuracy_delta through `compute_figures` (the independent-answers row at 48 items)."""
    row = validity.doc_rows(validity.ACC_TABLE, 3)["1 | 48 | A/A"]
    counts = acc.aa_exclusions(48, 1.0, 300, seed=11)
    for column, key in enumerate(("excludes 0", "below -0.02", "mcnemar")):
        doc = 100 * float(row[column].split()[0])
        lo, hi = tolerance(doc, 2000, 300)
        assert lo <= counts[key] <= hi, (key, counts[key], doc, (lo, hi))


@pytest.mark.parametrize("start, label, key, of", validity.FAMILY_ROWS[:2])
def test_family_rows_match_the_doc(start: str, label: str, key: str, of: str | None) -> None:
    table = validity.doc_table(validity.FAMILY_TABLE)
    doc = validity.doc_number(table, start, 1, 0)
    counts = fam.counts(label, 100, resamples=400, seed=11)
    n = 100 if of is None else counts[of]
    lo, hi = tolerance(doc, 2000, n)
    assert lo <= counts[key] <= hi, (label, key, counts[key], n, doc, (lo, hi))


def test_spec_coverage_at_8_requests_matches_the_doc() -> None:
    """spec_accept_length through `compute_figures`, 150 sets of 8 requests."""
    table = validity.doc_table(validity.SPEC_TABLE)
    counts = spec.coverage(8, 150, seed=11)
    for column, key in ((0, "covers"), (1, "above")):
        doc = validity.doc_number(table, "8", column, 0)
        lo, hi = tolerance(doc, 2000, 150)
        got = counts[f"spec_accept_length {key}"]
        assert lo <= got <= hi, (key, got, doc, (lo, hi))


def test_capacity_restarted_aa_matches_the_doc() -> None:
    """The restarted replicates' signed-rank interval on simulated A/A sweeps (30 of 8)."""
    header, keys, argv, sweeps, _ = validity.CAP_TABLES[0]
    table = validity.doc_rows(header, keys)
    row = next(k for k in table if k.startswith("1.0"))
    counts = capsim.truth_counts("aa", capsim.parse_args([*argv, "--sweeps", "30"]))
    for key, column in (("covered", 1), ("below", 2)):
        doc = validity.doc_number(table, row, column, 0)
        lo, hi = tolerance(doc, sweeps, counts["done"])
        assert lo <= counts[key] <= hi, (key, counts[key], counts["done"], doc, (lo, hi))
