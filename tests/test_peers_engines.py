"""The side-by-side's `engines` section without an engine: what each engine says of a run (two
scrapes of layergate's engine's own metrics, llama.cpp's logged perf blocks), the tools' median
and each tool's distance from it, and the table that prints them."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from benchmarks.peers.common import Measured
from benchmarks.peers.engine_timings import (
    engine_reference,
    histogram_quantile,
    llamacpp_reference,
    perf_blocks,
)
from benchmarks.peers.engines import Row, from_median, medians, print_table
from layergate.reference_engine.metrics import EngineMetrics, RequestRecord

LOG = Path(__file__).parent / "fixtures" / "peers" / "engines" / "llamacpp_server.log"


def test_histogram_quantile_interpolates_within_its_bucket() -> None:
    buckets = [(0.1, 2.0), (0.2, 6.0), (float("inf"), 8.0)]
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.1)  # rank 2: the first bound
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.15)  # rank 4: half-way in (0.1, 0.2]
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.2)  # in +Inf: the highest bound
    assert histogram_quantile(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None


def _record(tokens: int, ttft: float, e2e: float, finish: str = "length") -> RequestRecord:
    return RequestRecord("ok", finish, 32, tokens, ttft, e2e, 0.0, 0.0, 30 * tokens, 0, 0,
                         32, 0, 0, 0, 0, 1 << 20)


def test_the_engine_reference_is_the_difference_of_two_scrapes() -> None:
    registry = CollectorRegistry()
    metrics = EngineMetrics(registry, "full")
    metrics.record_request(_record(16, 5.0, 9.0))  # an earlier run's: must not count
    before = generate_latest(registry).decode()
    metrics.record_request(_record(16, 0.08, 0.08 + 15 * 0.06))
    metrics.record_request(_record(11, 0.09, 0.09 + 10 * 0.06, finish="stop"))
    ref = engine_reference(before, generate_latest(registry).decode())
    assert ref.requests == 2 and ref.ended_on_limit == 1
    assert ref.tokens_mean == pytest.approx(13.5)
    assert ref.means["ttft"] == pytest.approx(0.085)
    assert ref.means["itl"] == pytest.approx(0.06)
    assert 0.075 <= ref.ttft[50] <= 0.1  # within the bucket both fell in, not the earlier 5 s
    assert ref.e2e[99] <= 1.0


def test_a_scrape_of_another_server_is_refused() -> None:
    with pytest.raises(ValueError, match="not layergate's engine"):
        engine_reference("", "vllm:num_requests_running 0\n")
    with pytest.raises(ValueError, match=r"/metrics \(after\): unparsable"):
        engine_reference("", "layergate_requests_total{ 1\n")


def test_llamacpp_perf_blocks_are_read_per_request() -> None:
    blocks = perf_blocks(LOG.read_text())
    assert [(b.prompt_tokens, b.runs) for b in blocks] == [(6, 15), (32, 9), (0, 16)]
    assert blocks[0].eval_s == pytest.approx(0.19168)
    ref = llamacpp_reference(LOG.read_text())
    # a run per token after the first; a cached prompt's replay is a run, not a token
    assert ref.requests == 3 and ref.tokens == (16, 10, 16)
    assert ref.means["itl"] == pytest.approx((0.19168 / 15 + 0.09 / 9 + 0.01) / 3)
    assert ref.e2e[50] == pytest.approx(0.215) and ref.ttft[50] == pytest.approx(0.06006)


def test_a_perf_block_missing_a_line_is_named() -> None:
    lines = [line for line in LOG.read_text().splitlines() if " eval time" not in line
             or "prompt" in line]
    with pytest.raises(ValueError, match=r"log:\d+: a total time without"):
        perf_blocks("\n".join(lines), "log")


def _row(tool: str, ttft: float, engine: str = "e") -> Row:
    lat = {50: ttft, 90: 2 * ttft, 99: 3 * ttft}
    return Row(engine, tool, 0.5, 12, 16,
               Measured(tool, lat, lat, lat, 12, 1.0, 1.0, Path("raw")), None)


def test_each_tool_is_set_against_the_median_of_the_tools(capsys) -> None:
    rows = [_row("a", 0.1), _row("b", 0.2), _row("c", 0.4),
            Row("e", "d", 0.5, 12, 16, None, None, "RuntimeError: boom")]
    median = medians(rows)
    assert median[("ttft", 50)] == pytest.approx(0.2) and median[("e2e", 99)] == pytest.approx(0.6)
    assert from_median(rows[2], median)[("ttft", 90)] == pytest.approx(0.4)
    assert from_median(rows[3], median) == {}
    ref = llamacpp_reference(LOG.read_text())
    print_table([*rows, Row("e", "x", 0.5, 12, 16, None, ref)])
    out = capsys.readouterr().out
    assert "c | 12 | — | 400.0 (+200.0) | 800.0 (+400.0)" in out
    assert "median of the tools |  |  | 200.0 | 400.0 | 600.0" in out
    assert "x | failed | 10–16, 1 short" in out  # the engine's count of each answer's tokens
    assert "e itself, during x | 3 |  | 60.1" in out
    assert "d on e: failed: RuntimeError: boom" in out
