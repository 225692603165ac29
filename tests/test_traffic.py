"""The traffic format and the scenario mixes: validation with line-numbered errors, skipping
with reports, round trips, and the mix loader's selection and arrivals on the bundled data."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

import pytest
import yaml

from layergate.exporters.traffic import (
    TrafficError,
    TrafficRecord,
    read_traffic,
    traffic_sha256,
    write_traffic,
)
from layergate.harness import scenarios

GOOD = {"id": "a", "offset_s": 0.0, "scenario": "short", "endpoint": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}}


def _write(tmp_path: Path, lines: list) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


@pytest.mark.parametrize(("change", "field"), [
    ({"id": ""}, "id"),
    ({"offset_s": -1}, "offset_s"),
    ({"offset_s": "3"}, "offset_s"),
    ({"scenario": 3}, "scenario"),
    ({"endpoint": "/v1/embeddings"}, "endpoint"),
    ({"body": []}, "body"),
    ({"body": {"messages": []}}, "body.messages"),
    ({"body": {"messages": [{"content": "x"}]}}, "body.messages[0]"),
    ({"body": {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}},
     "body.max_tokens"),
    ({"endpoint": "/v1/completions", "body": {"max_tokens": 3}}, "body.prompt"),
    ({"response": "text"}, "response"),
    ({"extra": 1}, "extra"),
])
def test_bad_field_names_file_line_and_field(tmp_path: Path, change: dict, field: str) -> None:
    path = _write(tmp_path, [GOOD, {**GOOD, "id": "b", **change}])
    with pytest.raises(TrafficError) as info:
        read_traffic(path)
    assert (info.value.line, info.value.field) == (2, field)
    assert str(info.value).startswith(f"{path}:2: field {field!r}")


def test_invalid_json_and_duplicate_ids(tmp_path: Path) -> None:
    with pytest.raises(TrafficError, match=r":3: field '\(line\)': invalid JSON"):
        read_traffic(_write(tmp_path, [GOOD, "", "{not json"]))
    with pytest.raises(TrafficError, match=r":2: field 'id': duplicate id 'a' \(first on line 1"):
        read_traffic(_write(tmp_path, [GOOD, GOOD]))


def test_skip_invalid_reports_every_skipped_line(tmp_path: Path) -> None:
    path = _write(tmp_path, [GOOD, "[1]", {**GOOD, "id": "b"}, GOOD, {**GOOD, "id": "c",
                                                                     "offset_s": None}])
    traffic = read_traffic(path, skip_invalid=True)
    assert [r.id for r in traffic.records] == ["a", "b"]
    assert traffic.lines == (1, 3)
    assert [s.line for s in traffic.skipped] == [2, 4, 5]
    assert "duplicate id" in traffic.skipped[1].reason
    assert "offset_s" in traffic.skipped[2].reason


def test_write_read_round_trip_and_hash(tmp_path: Path) -> None:
    records = [TrafficRecord("x", 1.5, "long", "/v1/completions",
                             {"prompt": "héllo", "max_tokens": 2}, {"choices": []}),
               TrafficRecord("y", 0.0, "short", "/v1/chat/completions", GOOD["body"])]
    path = write_traffic(tmp_path / "out.jsonl", records)
    assert read_traffic(path).records == tuple(records)
    assert traffic_sha256(path) == traffic_sha256(write_traffic(tmp_path / "b.jsonl", records))


def test_missing_file_is_a_traffic_error(tmp_path: Path) -> None:
    with pytest.raises(TrafficError, match="cannot read"):
        read_traffic(tmp_path / "nope.jsonl")


def test_bundled_mixes_follow_their_weights_and_counts() -> None:
    assert {"saas-mix", "chat-multiturn", "long-context"} <= set(scenarios.mix_names())
    mix = scenarios.load_mix("saas-mix")
    traffic = scenarios.build_traffic("saas-mix")
    assert len(traffic) == mix.requests == len({r.id for r in traffic})
    weights = {c.name: c.weight for c in mix.classes}
    assert weights == {"short": 0.6, "medium": 0.25, "long": 0.15}  # a SaaS mix
    counts = Counter(r.scenario for r in traffic)
    assert counts == scenarios.class_counts(mix.classes, mix.requests)
    assert all(abs(counts[c] - w * mix.requests) < 1 for c, w in weights.items())
    assert traffic[0].offset_s == 0.0
    assert [r.offset_s for r in traffic] == sorted(r.offset_s for r in traffic)
    assert scenarios.build_traffic("saas-mix") == traffic  # seeded: same mix, same traffic
    assert len(scenarios.build_traffic("saas-mix", requests=7)) == 7


def test_selection_keeps_source_order_for_conversations() -> None:
    mix = scenarios.load_mix("chat-multiturn")
    source = [r.id for r in read_traffic(mix.sources[0]).records]
    drawn = [r.id for r in scenarios.select(mix, 40)]
    assert drawn == [i for i in source if i in set(drawn)]


def test_class_counts_largest_remainder() -> None:
    classes = (scenarios.MixClass("a", weight=0.6), scenarios.MixClass("b", weight=0.25),
               scenarios.MixClass("c", weight=0.15))
    assert scenarios.class_counts(classes, 7) == {"a": 4, "b": 2, "c": 1}
    assert sum(scenarios.class_counts(classes, 101).values()) == 101


def test_arrival_processes() -> None:
    poisson = scenarios.poisson_offsets(4000, rate=2.0, seed=1)
    gaps = [b - a for a, b in zip(poisson, poisson[1:], strict=False)]
    assert statistics.mean(gaps) == pytest.approx(0.5, rel=0.05)
    assert statistics.stdev(gaps) / statistics.mean(gaps) == pytest.approx(1.0, rel=0.08)
    bursty = scenarios.gamma_offsets(4000, rate=2.0, burstiness=0.25, seed=1)
    bgaps = [b - a for a, b in zip(bursty, bursty[1:], strict=False)]
    assert statistics.mean(bgaps) == pytest.approx(0.5, rel=0.1)
    assert statistics.stdev(bgaps) / statistics.mean(bgaps) == pytest.approx(2.0, rel=0.15)
    records = [TrafficRecord(str(i), t, "short", "/v1/completions", {"prompt": "x"})
               for i, t in enumerate([10.0, 12.0, 20.0])]
    stamps = scenarios.arrival_offsets(scenarios.Arrival("timestamps", speed=4.0), records, 0)
    assert stamps == [0.0, 0.5, 2.5]


def test_mix_errors_name_file_and_key(tmp_path: Path) -> None:
    base = yaml.safe_load(scenarios.resolve_mix("saas-mix").read_text())
    cases = [({"weights": {"short": 0.5, "medium": 0.25, "long": 0.15}}, "sum to 1"),
             ({"arrival": {"type": "uniform"}}, "arrival"),
             ({"requests": 0}, "requests"),
             ({"requests": 10_000}, r"class '\w+' needs \d+ records but its sources hold \d+"),
             ({"sources": ["traffic/none.jsonl"]}, "not found")]
    for change, message in cases:
        path = tmp_path / "saas-mix.yaml"
        path.write_text(yaml.safe_dump({**base, **change}))
        with pytest.raises(scenarios.MixError, match=message):
            scenarios.build_traffic(path)
    with pytest.raises(scenarios.MixError, match="unknown scenario 'nope'.*saas-mix"):
        scenarios.load_mix("nope")


def test_length_class_boundaries() -> None:
    assert [scenarios.length_class(n) for n in (0, 9, 10, 50, 51)] == [
        "short", "short", "medium", "medium", "long"]
