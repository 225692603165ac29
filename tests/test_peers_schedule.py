"""The schedule sections of the side-by-side (benchmarks/peers/schedule.py): the one trace
written into each tool's format, and the lag read from a real echo server's timeline."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import httpx
import pytest

from benchmarks.peers import schedule
from benchmarks.peers.common import read_truth
from layergate.exporters.traffic import read_traffic
from tests.support.echo import echo_server

TRACE = schedule.Trace((0.0, 0.0005, 0.25, 1.5))


def test_each_format_carries_the_same_offsets(tmp_path: Path) -> None:
    moon = [json.loads(x) for x in schedule.write_mooncake(TRACE, tmp_path / "m.jsonl")
            .read_text().splitlines()]
    assert [r["timestamp"] for r in moon] == [0.0, 0.5, 250.0, 1500.0]
    assert all(len(r["hash_ids"]) * schedule.BLOCK >= r["input_length"] for r in moon)
    assert len({h for r in moon for h in r["hash_ids"]}) == 2 * len(moon)  # nothing shared
    guide = [json.loads(x) for x in schedule.write_guidellm(TRACE, tmp_path / "g.jsonl")
             .read_text().splitlines()]
    assert [r["timestamp"] for r in guide] == list(TRACE.offsets)
    with schedule.write_azure(TRACE, tmp_path / "a.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows[1]["TIMESTAMP"] == "2026-01-01 00:00:00.000500"
    assert rows[3]["TIMESTAMP"] == "2026-01-01 00:00:01.500000"
    records = read_traffic(schedule.write_layergate(TRACE, tmp_path / "t.jsonl")).records
    assert [r.offset_s for r in records] == list(TRACE.offsets)


def test_the_bursty_trace_is_fixed_by_its_seed() -> None:
    a, b = schedule.bursty(60, 20.0, 0), schedule.bursty(60, 20.0, 0)
    assert a == b != schedule.bursty(60, 20.0, 1)
    gaps = [y - x for x, y in zip(a.offsets, a.offsets[1:], strict=False)]
    assert a.offsets[-1] == pytest.approx(20.0, abs=1e-3) and min(gaps) < 0.001


def test_the_lag_is_each_arrival_less_its_intended_time(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.jsonl"
    late = 0.2  # the third request goes out 200 ms behind its schedule
    sent = []  # when each request really went out: a loaded machine sends late too
    with echo_server("--timeline", str(timeline)) as url:
        start = time.time()
        for i, offset in enumerate((0.0, 0.1, 0.2)):
            time.sleep(max(0.0, start + offset + (late if i == 2 else 0) - time.time()))
            sent.append(time.time())
            with httpx.stream("POST", f"{url}/v1/completions", timeout=10,
                              json={"prompt": "a", "max_tokens": 2, "stream": True}) as r:
                for _ in r.iter_lines():
                    pass
    arrivals = list(read_truth(timeline).arrivals)
    lag = schedule.lags(arrivals, (0.0, 0.1, 0.2))
    # the server's view of each request's lateness is the client's, to loopback's delay and
    # the connection's making, which a busy machine stretches (over 20 ms seen): still far
    # below the 200 ms it must tell apart
    behind = [s - sent[0] - offset for s, offset in zip(sent, (0.0, 0.1, 0.2), strict=True)]
    assert lag[0] == 0 and all(abs(x - y) < 0.06 for x, y in zip(lag, behind, strict=True))
    assert lag[2] > late - 0.02
    got = schedule.step("x", 10.0, arrivals, schedule.Trace((0.0, 0.1, 0.2)), 1, 0.95, 50.0)
    assert got.seen == got.sent == 3 and not got.sustained  # lag p99 ~200 ms
    # two arms per row: each intended time counted twice
    assert list(schedule.lags([1.0, 1.0, 2.0, 2.01], (0.0, 1.0), arms=2)) == pytest.approx(
        [0.0, 0.0, 0.0, 0.01])
