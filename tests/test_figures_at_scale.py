"""What keeps figures at a million rows in seconds and in memory, checked against the plain
way on small runs: the store read in bulk (summaries, names, chunks) against its columns,
the bootstrap on two threads against one, mostly-zero columns kept sparse, traffic offsets
as arrays, the run letting its columns go once aligned, and the reports' seeded sample."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

from layergate.exporters.figures import bootstrap
from layergate.exporters.figures.bootstrap import Sparse, compact, dense, resample_sums
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.traffic import Offsets
from layergate.harness.gate import load_policy
from layergate.harness.gate.fixed.evaluation import evaluate_run, run_figures
from layergate.harness.report.html import render_html
from layergate.harness.rundir import load_run
from layergate.harness.store import outputs, scan, summary_read
from tests.support.synthetic_run import write_run
from tests.test_figures_columnar import assert_same_figures

CFG = MetricsConfig(n_resamples=200, min_samples=2, text_sample=40)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("scale") / "run", 300).path


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / "run"))


def test_the_bulk_read_is_taken_and_equals_the_columns_read(
        run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = run_figures(load_run(run_dir), CFG)
    slow = _copy(run_dir, tmp_path)
    with closing(sqlite3.connect(slow / "results.sqlite")) as conn:
        conn.execute("DROP TABLE result_names")  # as a store of an earlier version
        conn.commit()
    assert_same_figures(run_figures(load_run(slow), CFG), want)

    def refused(*_: object, **__: object) -> None:
        raise AssertionError("read from the columns")

    monkeypatch.setattr(scan, "read_columns", refused)
    for reader in (summary_read, outputs):  # chunk edges inside the run
        monkeypatch.setattr(reader, "CHUNK", 7)
    assert_same_figures(run_figures(load_run(run_dir), CFG), want)


def test_a_row_whose_name_is_missing_is_read_from_its_columns(run_dir: Path,
                                                             tmp_path: Path) -> None:
    want = run_figures(load_run(run_dir), CFG)
    path = _copy(run_dir, tmp_path)
    with closing(sqlite3.connect(path / "results.sqlite")) as conn:
        key = conn.execute("SELECT key FROM result_names WHERE name = 'r7'").fetchone()[0]
        conn.execute("DELETE FROM result_names WHERE key = ?", (key,))
        conn.commit()
    found = scan.read_scan(path / "results.sqlite")
    assert "r7" in set(found.replay.request_id.tolist())
    assert not found.replay.factorised  # the columns' read, which factorises nothing
    assert_same_figures(run_figures(load_run(path), CFG), want)


def _columns(n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(5)
    strata = np.sort(rng.integers(0, 3, n))
    cols = {f"dense{i}": rng.gamma(2, 1, n) for i in range(4)}
    cols |= {f"sparse{i}": (rng.random(n) < 0.05) * rng.random(n) for i in range(3)}
    cols |= {"flag": (rng.random(n) < 0.5).astype(float), "same": np.ones(n)}
    cols["nan"] = np.where(rng.random(n) < 0.5, np.nan, 1.0)
    return cols, strata


def test_the_bootstrap_on_two_threads_draws_what_one_thread_draws(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cols, strata = _columns(3000)
    monkeypatch.setattr(bootstrap, "_CELLS_PER_CHUNK", 5000)  # many chunks and batches:
    monkeypatch.setattr(bootstrap, "_CELLS_PER_BATCH", 15000)  # both buffers in turn
    monkeypatch.setattr(bootstrap, "_workers", lambda: 1)
    one = resample_sums(cols, strata, 3, 300, 11)
    monkeypatch.setattr(bootstrap, "_workers", lambda: 2)
    two = resample_sums(cols, strata, 3, 300, 11)
    assert np.array_equal(one.boot, two.boot, equal_nan=True)
    assert np.array_equal(one.point, two.point, equal_nan=True)
    assert one.boot.shape == (3, 300, len(cols)) and np.isfinite(one.boot[:, :, 0]).all()


def test_compacted_columns_keep_every_value_and_every_sum() -> None:
    cols, strata = _columns(3000)
    small = {name: compact(col) for name, col in cols.items()}
    assert isinstance(small["sparse0"], Sparse) and small["flag"].dtype == bool
    assert small["dense0"].dtype == np.float64  # gamma draws are not float32-exact
    for name, col in cols.items():
        assert np.array_equal(dense(small[name]).astype(float), col, equal_nan=True), name
    got, want = (resample_sums(c, strata, 3, 100, 3) for c in (small, cols))
    assert np.array_equal(got.boot, want.boot, equal_nan=True)
    assert np.array_equal(got.point, want.point, equal_nan=True)


def test_offsets_read_as_arrays_answer_as_the_dict_did() -> None:
    offsets = Offsets(["b", "a", "c", "a"], [2.0, 1.0, 3.0, 1.5])  # the last line of a wins
    assert dict(offsets) == {"a": 1.5, "b": 2.0, "c": 3.0} and len(offsets) == 3
    assert np.array_equal(offsets.at(["c", "zz", "a"]), [3.0, np.nan, 1.5], equal_nan=True)
    assert offsets.get("zz") is None and offsets["b"] == 2.0
    assert np.isnan(Offsets([], []).at(["a"])).all()


def test_the_run_lets_its_columns_go_once_its_figures_are_made(run_dir: Path) -> None:
    run = load_run(run_dir)
    tallies = list(run.tallies)
    first = run_figures(run, CFG)
    assert "_stored" not in run.__dict__ and "_scan" not in run.__dict__
    assert run.tallies == tallies and run.send_lag == load_run(run_dir).send_lag
    assert_same_figures(run_figures(run, CFG), first)  # read again when asked again


def test_reports_show_a_seeded_sample_of_a_run_above_the_limit(
        run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = load_run(run_dir)
    rows, of = run.shown(limit=12)
    ids = {r.request_id for r in rows}
    assert of == 300 and len(ids) == 12
    assert len(rows) == 12 * 3  # every arm's row of each request drawn
    assert ids == {r.request_id for r in load_run(run_dir).shown(limit=12)[0]}  # seeded
    assert load_run(run_dir).shown(limit=300) == (run.results, None)
    monkeypatch.setattr("layergate.harness.rundir.SHOWN_REQUESTS", 12)
    result = evaluate_run(load_run(run_dir), load_policy("default"))
    assert result.shown_sampled_from == 300
    assert "From a seeded sample of 12 of the run&#x27;s 300 requests" in render_html(result) \
        or "From a seeded sample of 12 of the run's 300 requests" in render_html(result)


@pytest.mark.parametrize("baseline_everywhere", [True, False])
def test_rows_read_in_the_figures_order_give_the_figures_of_the_records(
        tmp_path: Path, baseline_everywhere: bool) -> None:
    """Every request with a baseline row: the store's rows come in align's order and the
    aligned columns are slices of them; else in write order. The figures are the records'
    either way (an arm missing a request, odd rows, gaps and parts included)."""
    from layergate.exporters.figures.aligned import align
    from layergate.exporters.figures.compute import compute_figures
    from tests.test_figures_columnar import _write, varied_rows

    rows = [r for r in varied_rows() if r.repeat == 0 and r.request_id != "r99"]
    if not baseline_everywhere:
        rows = [r for r in rows if (r.request_id, r.arm) != ("r5", "baseline")]
    run = _write(tmp_path / "run", rows, {})
    replay = scan.read_scan(run.results_path).replay
    assert (replay.itl_start is not None) == baseline_everywhere
    al = align(replay)
    whole = al.arms["candidate"]  # answered every request
    assert np.shares_memory(whole.e2e, replay.e2e) == baseline_everywhere
    assert not np.shares_memory(al.arms["baseline2"].e2e, replay.e2e)  # lacks r12: a copy
    offsets = {f"r{i}": i * 0.1 for i in range(30)}
    assert_same_figures(run_figures(load_run(run.path), CFG),
                        compute_figures(rows, config=CFG, offsets=offsets))
