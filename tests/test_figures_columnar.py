"""Figures read from the store as columns equal the figures computed from the same records
in memory (same values, intervals and details for the same seed), on rows of every kind and
on a 10 k synthetic run; the stop hook's reader costs O(new rows) per look; the BLEU / chrF
sample is reported."""

from __future__ import annotations

import math
import sqlite3
from contextlib import closing
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from layergate.exporters.figures import Figure
from layergate.exporters.figures.columns import from_results
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.schedule_lag import schedule_lag
from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.gate.fixed.evaluation import run_figures
from layergate.harness.manifest import Manifest, now_iso
from layergate.harness.rundir import RunDir, load_run
from layergate.harness.store import ResultStore
from layergate.harness.store.tail import Latest, StoreTail
from tests.support.synthetic_run import synthetic, write_run

CFG = MetricsConfig(n_resamples=200, min_samples=2, min_determinism_prompts=1,
                    text_sample=5)


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9,
                                                                 abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def assert_same_figures(got: list[Figure], want: list[Figure]) -> None:
    keyed = {(f.name, f.arm, f.scenario): asdict(f) for f in want}
    assert {(f.name, f.arm, f.scenario) for f in got} == set(keyed)
    for f in got:
        w = keyed[(f.name, f.arm, f.scenario)]
        diff = {k: (v, w[k]) for k, v in asdict(f).items() if not _same(v, w[k])}
        assert not diff, (f.name, f.arm, f.scenario, diff)


def _row(rid: str, arm: str, **kw) -> ArmResult:
    base = dict(request_id=rid, arm=arm, scenario="chat" if int(rid[1:]) % 3 else "code",
                ok=True, ttft_s=0.05, e2e_s=0.5, itl_s=(0.01, 0.02, 0.03), output_text="a b c d",
                output_tokens=4, prompt_tokens=7, finish_reason="stop", max_tokens=8,
                token_ids=(1, 2, 3, 4), tokens_from="usage",
                extension={"theoretical_saving": 0.25, "computed_tokens": 11,
                           "peak_memory_bytes": 1000, "prefix_cache_hit_tokens": 2,
                           "prefix_cache_query_tokens": 6})
    return ArmResult(**{**base, **kw})


def varied_rows() -> list[ArmResult]:
    """Every kind of row the reader must get right."""
    rows = []
    for i in range(30):
        rid = f"r{i}"
        rows.append(_row(rid, "baseline", e2e_s=0.5 + i / 100, top_logprobs=(
            {"a": -0.1, "b": -2.5},) * 4 if i % 4 == 0 else None,
            send_lag_s=None if i % 3 else i / 1000))  # the lag recorded on some rows
        cand = dict(e2e_s=0.4 + i / 90, extension={"theoretical_saving": 0.5})
        if i % 5 == 0:  # a different output: token ids and text
            cand |= dict(token_ids=(1, 2, 9, 9), output_text="a b x y")
        if i % 4 == 0:
            cand["top_logprobs"] = ({"a": -0.2, "b": -1.5},) * 4
        if i == 7:
            cand |= dict(ok=False, error="timeout", e2e_s=None, ttft_s=None, itl_s=())
        if i == 8:  # odd extension values: a bool, a string, a NaN (non-strict JSON)
            cand["extension"] = {"theoretical_saving": True, "computed_tokens": "many",
                                 "peak_memory_bytes": float("nan")}
        if i == 9:
            cand |= dict(tokens_from="characters", output_tokens=7, quirks=("no_usage",))
        if i == 10:
            cand |= dict(finish_reason="length", output_tokens=8, prompt_tokens=0)
        if i == 11:  # no finish reason, no usage, no extension, no gaps
            cand |= dict(finish_reason=None, tokens_from=None, extension={}, itl_s=())
        rows.append(_row(rid, "candidate", **cand))
        if i != 12:  # a request baseline2 never answered
            rows.append(_row(rid, "baseline2", e2e_s=0.52 + i / 100, scenario="chat"))
    for rep in range(3):  # a repeat suite inside the run: its rows are no replay rows
        rows += [_row("r99", arm, repeat=rep, concurrency=2) for arm in ("baseline", "candidate")]
    return rows


def _write(path: Path, rows: list[ArmResult], responses: dict[str, dict]) -> RunDir:
    run = RunDir(path)
    rids = sorted({r.request_id for r in rows}, key=lambda x: int(x[1:]))
    run.write_traffic(TrafficRecord(rid, i * 0.1, "chat", "/v1/completions", {"prompt": "p"},
                                    responses.get(rid)) for i, rid in enumerate(rids))
    with run.open_store() as store:
        store.put_many(rows)
        counts = store.counts_by_arm()
    run.write_manifest(Manifest(id="t", kind="replay", status="complete", created=now_iso(),
                                config={"users": 4}, arms={"baseline": "x", "candidate": "y",
                                                           "baseline2": "z"},
                                traffic=run.traffic_summary(len(rids), None), counts=counts))
    return run


@pytest.mark.parametrize("stored", ["binary", "columns"])
def test_store_columns_give_the_figures_of_the_records(tmp_path: Path, stored: str) -> None:
    """`binary`: rows as this version writes them; `columns`: rows without the binary
    summary (an earlier version's), read from their columns."""
    rows = varied_rows()
    recorded = {"choices": [{"text": "a b c d", "finish_reason": "stop"}],
                "usage": {"completion_tokens": 4}}
    run = _write(tmp_path / "run", rows, {"r1": recorded, "r2": recorded})
    if stored == "columns":
        with closing(sqlite3.connect(run.results_path)) as conn, conn:
            conn.execute("UPDATE results SET summary = NULL WHERE rowid % 2 = 0")
    loaded = load_run(run.path)
    got = run_figures(loaded, CFG)
    offsets = {f"r{i}": i * 0.1 for i in range(31)} | {"r99": 3.0}
    from layergate.exporters.figures.recorded import recorded_result

    extra = [recorded_result(rid, "chat", recorded) for rid in ("r1", "r2")]
    want = compute_figures([*rows, *extra], config=CFG, offsets=offsets)
    assert_same_figures(got, want)
    bleu = next(f for f in got if (f.name, f.arm, f.scenario) == ("bleu", "candidate", "all"))
    # 30 baseline answers, at most 5 pairs compared as text: the sample says so
    assert bleu.detail["sampled"] == 5 and bleu.detail["pairs"] == 29
    assert "default_rng(seed + 1)" in bleu.detail["sample_rule"]
    # the send lag: in the columns, and the run's over every row (the repeat suite's too)
    assert loaded.send_lag == schedule_lag(r.send_lag_s for r in rows)
    assert loaded.send_lag.n == 10
    with ResultStore(run.results_path, create=False) as store:
        scan = store.scan()
        lags = scan.replay.send_lag
        # the one pass counts and splits as the queries do
        assert scan.tallies == store.tallies() and len(scan.repeated) == 6
        assert store.results_at(scan.repeated) == store.repeated()
    want_lags = from_results(r for r in rows if r.request_id != "r99").send_lag
    assert np.array_equal(lags, want_lags, equal_nan=True)


def test_a_10k_synthetic_run_from_the_store_equals_the_records(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", 10_000)
    config = MetricsConfig(n_resamples=100)
    got = run_figures(load_run(run.path), config)
    offsets = {f"r{i}": i * 0.01 for i in range(10_000)}
    want = compute_figures(list(synthetic(10_000)), run.read_scrapes(), config=config,
                           offsets=offsets)
    assert_same_figures(got, want)


LIGHT = dict(itl_s=(), token_ids=None, extension={})  # rows cheap to write and decode


def test_the_stop_hooks_reader_reads_each_row_once(tmp_path: Path) -> None:
    """50 k results written in batches, the tail polled after each: rows read stay at 50 k
    (a reader that re-read everything would read 1.3 M), every follower sees the rows from
    where it joined, and what the stop hook's follower holds is the store's."""
    with ResultStore(tmp_path / "results.sqlite") as store:
        store.put(_row("r99999", "baseline", **LIGHT))  # a resumed run's earlier row
        tail, latest, seen = StoreTail(store), Latest(), []
        tail.follow(latest)
        tail.follow(seen.append, after=store.last_rowid())  # this invocation's rows only
        written = 1
        for batch in range(50):
            store.put_many(_row(f"r{batch * 500 + i}", arm, **LIGHT) for i in range(500)
                           for arm in ("baseline", "candidate"))
            written += 1000
            assert tail.poll() == (1001 if batch == 0 else 1000) and latest.changed
            assert len(latest.results) == written and not latest.changed
        assert store.rows_read == written == 50_001 and len(seen) == 50_000
        store.put(_row("r3", "candidate", ok=False, **LIGHT))  # replaced: moves to the end
        assert tail.poll() == 1 and [r.ok for r in seen[-1:]] == [False]
        assert store.rows_read == 50_002
        assert latest.results == store.results()
        assert tail.poll() == 0 and not latest.changed
        assert store.rows_read == 2 * 50_001 + 1
        with pytest.raises(ValueError, match="joined after rowid"):
            tail.follow(seen.append)


@pytest.mark.parametrize("bad", ["{not json", '{"id": "r1"}'])
def test_an_unreadable_traffic_line_is_an_error_naming_it(tmp_path: Path, bad: str) -> None:
    from layergate.harness.rundir import RunDirError

    run = _write(tmp_path / "run", varied_rows()[:6], {})
    run.traffic_path.write_text(bad + "\n")
    with pytest.raises(RunDirError, match="traffic.jsonl:1"):
        run_figures(load_run(run.path), CFG)


def test_the_lean_schedule_reads_what_the_full_reader_reads(tmp_path: Path) -> None:
    from layergate.exporters.traffic import read_schedule, read_traffic, write_traffic

    response = {"choices": [{"text": "x", "finish_reason": "stop"}],
                "usage": {"completion_tokens": 1}}
    path = write_traffic(tmp_path / "t.jsonl", [
        TrafficRecord('say "hi"\\', 0.5, "chat", "/v1/completions", {"prompt": '"id":"no"'}),
        TrafficRecord("r2", 1e-7, "code", "/v1/completions", {"prompt": "p"}, response),
        TrafficRecord("r3", 12, "chat", "/v1/completions", {"prompt": "p"})])
    with path.open("a") as fh:  # a hand-written line: other key order, spaces
        fh.write('{"scenario": "chat", "offset_s": 3.25, "id": "r4", "endpoint": '
                 '"/v1/completions", "body": {"prompt": "p"}}\n')
    full = read_traffic(path).records
    lean = read_schedule(path)
    assert lean.offsets == {r.id: r.offset_s for r in full}
    assert lean.recorded == [("r2", "code", response)]


def test_the_schedule_read_by_blocks_reads_what_the_lines_say(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of lines as write_traffic writes them are read in bulk; a block holding any
    other line (a response, another key order, a blank line) line by line; the blocks cut
    lines anywhere, and an error names its line across them."""
    from layergate.exporters import traffic

    response = {"choices": [{"text": "x", "finish_reason": "stop"}]}
    records = [TrafficRecord(f'r{i}' if i % 7 else f'q"{i}\\', i / 3, "chat",
                             "/v1/completions", {"prompt": "p"},
                             response if i == 40 else None) for i in range(120)]
    path = traffic.write_traffic(tmp_path / "t.jsonl", records)
    text = path.read_text().splitlines(keepends=True)
    text[70:70] = ["\n", '{"offset_s": 9.5, "id": "r999", "endpoint": "/v1/completions", '
                   '"body": {"prompt": "p"}}\r\n']
    path.write_text("".join(text).rstrip("\n"))  # the last line without its newline
    monkeypatch.setattr(traffic, "_BLOCK", 500)  # a few lines a block
    lean = traffic.read_schedule(path)
    assert lean.offsets == {r.id: r.offset_s for r in records} | {"r999": 9.5}
    assert lean.recorded == [("r40", "chat", response)]
    text[100] = '{"id": 5}\n'
    path.write_text("".join(text))
    with pytest.raises(traffic.TrafficError, match=":101"):
        traffic.read_schedule(path)


def test_a_file_mentions_a_text_across_the_blocks_it_is_read_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from layergate.exporters import traffic

    monkeypatch.setattr(traffic, "_BLOCK", 8)
    path = tmp_path / "t.jsonl"
    for at in range(20):  # the text at every place a block can cut it
        path.write_text("x" * at + '"assistant"' + "y" * 5)
        assert traffic.mentions(path, '"assistant"')
        assert not traffic.mentions(path, '"reference"')
