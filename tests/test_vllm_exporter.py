"""The vLLM stand-in serves what the recorded real vLLM 0.32 page has: the same families,
help texts, label names and histogram buckets."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.vllm_exporter import (
    E2E,
    HITS,
    QUERIES,
    SUCCESS,
    TPOT,
    TTFT,
    FakeVllm,
    recorded_buckets,
    recorded_families,
)


def _shape(families: dict, name: str) -> tuple:
    f = families[name]
    labels = {k for s in f.samples for k in s.labels if k != "le"}
    return f.type, f.documentation, labels


def test_the_stand_in_matches_the_recorded_vllm_page() -> None:
    fake = FakeVllm("m")
    for arm in (fake.e2e, fake.ttft, fake.tpot):
        arm.labels("m", "0").observe(0.5)
    for counter in (fake.queries, fake.hits):
        counter.labels("m", "0").inc()
    fake.success.labels("m", "0", "stop").inc()
    served = {f.name: f for f in text_string_to_metric_families(
        generate_latest(fake.registry).decode())}
    recorded = recorded_families()
    for name in (E2E, TTFT, TPOT, SUCCESS, QUERIES, HITS):
        assert _shape(served, name) == _shape(recorded, name), name
    # the long tail vLLM 0.32 has (TTFT to 2560 s), not an older release's 10 s
    assert recorded_buckets(TTFT)[-1] == 2560.0
    for name in (E2E, TTFT, TPOT):
        served_bounds = sorted({float(s.labels["le"]) for s in served[name].samples
                                if s.name.endswith("_bucket")} - {float("inf")})
        assert tuple(served_bounds) == recorded_buckets(name)
