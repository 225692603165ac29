"""Imported traffic replayed for real. An imported mooncake trace sent to the reference
engine (a tiny random Llama with the real tokenizer, prefix cache on, its 16-token blocks) gets
prefix-cache hits of exactly the trace's shared full blocks; and schedule fidelity: a
replay the load tool cannot keep up with reports its lag and is inconclusive under the
policy's bound, a light one lags by milliseconds and passes it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from layergate.exporters.catalogue import SCHEDULE_LAG
from layergate.exporters.prom_text import cache_counters
from layergate.exporters.traffic import TrafficRecord, write_traffic
from layergate.harness.gate import evaluate
from layergate.harness.processes import ManagedProcess
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.report.json_report import to_dict
from layergate.harness.rundir import load_run
from layergate.harness.stack.engines import start_engine
from layergate.harness.traces import TraceImportConfig, import_trace
from layergate.reference_engine.config import EngineConfig
from tests.support.echo import echo_server

pytestmark = [pytest.mark.slow, pytest.mark.locust]

TRACE = Path(__file__).resolve().parent / "fixtures" / "traces" / "mooncake_reuse.jsonl"
BLOCK = EngineConfig.prefix_cache_block  # the engine's cache block (16 tokens): the trace's
TOKEN_DELAY_S = 0.05


@pytest.fixture(scope="module")
def tiny_engine(tmp_path_factory) -> Iterator[ManagedProcess]:
    from tests.support.tiny_llama import write_tiny_checkpoint

    model = tmp_path_factory.mktemp("tiny-llama")
    write_tiny_checkpoint(model, model)
    proc = start_engine("--model", str(model), "--prefix-cache", "on")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    with echo_server("--token-delay", str(TOKEN_DELAY_S)) as url:
        yield url


def expected_hits(rows: list[dict]) -> list[int]:
    """Per request, in order: the tokens of its leading blocks that an earlier prompt held
    as full blocks (a partial last block is never cached)."""
    cached: set[tuple[int, ...]] = set()
    hits = []
    for row in rows:
        ids, n = row["hash_ids"], row["input_length"]
        k = 0
        while k < len(ids) and tuple(ids[: k + 1]) in cached:
            k += 1
        hits.append(k * BLOCK)
        cached |= {tuple(ids[: i + 1]) for i in range(n // BLOCK)}
    return hits


def test_an_imported_mooncake_trace_hits_the_prefix_cache_as_the_trace_shares(
        tmp_path: Path, tiny_engine: ManagedProcess, echo: str) -> None:
    from layergate.reference_engine.loading import ensure_converted

    traffic = tmp_path / "mooncake.jsonl"
    import_trace(TraceImportConfig(format="mooncake", source=TRACE, out=traffic,
                                   block_size=BLOCK, time_scale=0.2,
                                   tokenizer=str(ensure_converted() / "tokenizer.json")))
    # one record at a time (closed loop, one user): the cache holds every earlier prompt
    out = run_replay(ReplayConfig(out=tmp_path / "run", traffic=traffic, users=1,
                                  arms={"baseline": tiny_engine.url, "candidate": echo},
                                  progress=False))
    run = load_run(out)
    assert run.complete
    rows = [json.loads(line) for line in TRACE.read_text().splitlines()]
    by_id = {r.request_id: r for r in run.results if r.arm == "baseline"}
    got = [by_id[f"mooncake-{i + 1}"] for i in range(len(rows))]
    assert all(r.ok for r in got), [r.error for r in got]
    assert [r.prompt_tokens for r in got] == [row["input_length"] for row in rows]
    hits = [r.extension["prefix_cache_hit_tokens"] for r in got]
    assert hits == expected_hits(rows) == [0, 32, 16, 0, 32, 32, 0, 48]
    # the engine's own counters say the same: hits over the run / prompt tokens queried
    scrape = {s.when: s.text for s in run.scrapes if s.arm == "baseline"}
    delta = cache_counters(scrape["after"]).hits - cache_counters(scrape["before"]).hits
    assert delta == sum(hits) == 160


def _traffic(path: Path, n: int, spacing_s: float) -> Path:
    return write_traffic(path, [
        TrafficRecord(f"r{i}", i * spacing_s, "s", "/v1/completions",
                      {"prompt": "one two three", "max_tokens": 4}) for i in range(n)])


def _policy(path: Path) -> Path:
    path.write_text("name: lag\nmin_samples: 5\nmax_send_lag_p99_s: 0.5\n"
                    "metrics:\n  exact_match: {threshold: -0.5}\n")
    return path


@pytest.mark.parametrize(("spacing_s", "in_flight", "lagged"), [
    (0.0, 1, True),  # 12 records at once, one at a time, ~0.2 s each: the tool falls behind
    (0.3, 4, False)])  # one every 0.3 s, each done in ~0.2 s: on time
def test_schedule_fidelity_is_reported_and_bounds_the_verdict(
        tmp_path: Path, echo: str, spacing_s: float, in_flight: int, lagged: bool) -> None:
    out = run_replay(ReplayConfig(out=tmp_path / "run", traffic=_traffic(tmp_path / "t.jsonl",
                                                                          12, spacing_s),
                                  arms={"baseline": echo, "candidate": echo},
                                  max_in_flight=in_flight, progress=False))
    schedule = load_run(out).manifest.schedule
    assert schedule["n"] == 24  # every send, on both arms
    assert schedule["lag_p50_s"] <= schedule["lag_p99_s"] <= schedule["lag_max_s"]
    result = evaluate(out, _policy(tmp_path / "policy.yaml"))
    check = next(c for c in result.checks if c.name == SCHEDULE_LAG)
    report = to_dict(result)
    assert report["run"]["schedule"] == {**schedule, "bound_s": 0.5}
    assert report["metrics"][SCHEDULE_LAG]["value"] == schedule["lag_p99_s"]
    if lagged:
        # the eleventh record waits for ten before it: over a second late
        assert schedule["lag_max_s"] > 1.5 and schedule["lag_p99_s"] > 0.5
        assert check.status == "inconclusive" and "the load tool" in check.reason
        assert result.verdict == "inconclusive"
        assert any(r.startswith(SCHEDULE_LAG) for r in result.reasons)
    else:
        assert 0 <= schedule["lag_p99_s"] < 0.1, schedule  # milliseconds
        assert check.status == "pass" and " ms" in check.reason
        assert result.verdict == "pass", result.reasons
