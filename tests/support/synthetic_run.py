"""A synthetic replay run of N paired requests x 3 arms, written through the real store as a
replay writes it: three scenarios, streamed timings with inter-token gaps, token ids, texts
that mostly agree, the `layergate` extension, cache-hit scrapes. Shared by the scale test
and benchmarks/metrics_scale.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.manifest import Manifest, now_iso
from layergate.harness.rundir import RunDir

WORDS = np.array("the a cat dog sat ran on under mat tree house red blue big small and".split())
ARMS = (("baseline", 1.0, 1.0), ("baseline2", 1.0, 0.97), ("candidate", 0.8, 0.9))
BATCH = 20_000


def synthetic(n: int, seed: int = 0) -> Iterator[ArmResult]:
    """n requests x 3 arms, arm by arm (outputs, gaps and extensions shared where equal)."""
    rng = np.random.default_rng(seed)
    outputs: dict[tuple[int, int, bool], tuple[tuple[int, ...], str]] = {}
    scen = rng.choice(["short", "medium", "long"], size=n)
    tokens = rng.integers(4, 33, size=n)
    for arm, speed, agree in ARMS:
        ttft = rng.gamma(4, 0.01, size=n)
        tpot = rng.gamma(9, 0.004, size=n) * speed
        flip = rng.random(n) > agree
        ok = rng.random(n) > 0.005
        for i in range(n):
            k = int(tokens[i])
            key = (i % 50, k, bool(flip[i]))
            if key not in outputs:
                ids = tuple(range(i % 50, i % 50 + k))
                if flip[i]:
                    ids = ids[: k // 2] + tuple(x + 1 for x in ids[k // 2:])
                outputs[key] = ids, " ".join(WORDS[np.asarray(ids) % len(WORDS)])
            ids, text = outputs[key]
            gap = round(float(tpot[i]), 4)
            yield ArmResult(
                request_id=f"r{i}", arm=arm, scenario=str(scen[i]), ok=bool(ok[i]),
                ttft_s=float(ttft[i]), e2e_s=float(ttft[i] + tpot[i] * (k - 1)),
                itl_s=(gap,) * (k - 1), output_text=text, output_tokens=k,
                finish_reason="length" if k == 32 else "stop", max_tokens=32, token_ids=ids,
                prompt_tokens=20, tokens_from="usage",
                extension={"theoretical_saving": 0.3 if arm == "candidate" else 0.0,
                           "computed_tokens": 20 - 3 + k - 1 + 2, "peak_memory_bytes": 10_000 + k,
                           "prefix_cache_hit_tokens": 3, "prefix_cache_query_tokens": 10})


def scrape(hits: float) -> str:
    return ("# TYPE layergate_prefix_cache_hits_total counter\n"
            "# TYPE layergate_prefix_cache_queries_total counter\n"
            f"layergate_prefix_cache_hits_total{{policy=\"full\"}} {hits}\n"
            f"layergate_prefix_cache_queries_total{{policy=\"full\"}} {hits * 3}\n")


def write_run(path: Path, n: int, candidates: tuple[str, ...] = ("candidate",)) -> RunDir:
    """A complete replay run directory of n paired requests, written as a replay writes it;
    each of `candidates` answers as the synthetic candidate does."""
    run = RunDir(path)
    run.write_traffic(TrafficRecord(f"r{i}", i * 0.01, "chat", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": f"q{i}"}],
                                     "max_tokens": 32}) for i in range(n))
    with run.open_store() as store:
        batch: list[ArmResult] = []
        for result in synthetic(n):
            batch += [result] if result.arm != "candidate" else [
                dataclasses.replace(result, arm=name) for name in candidates]
            if len(batch) == BATCH:
                store.put_many(batch, worker="synthetic")
                batch = []
        store.put_many(batch, worker="synthetic")
        counts = store.counts_by_arm()
    arms = {a: "http://127.0.0.1:1" for a, _, _ in ARMS if a != "candidate"}
    arms.update(dict.fromkeys(candidates, "http://127.0.0.1:1"))
    for arm in arms:
        for when, hits in (("before", 0.0), ("after", 900.0)):
            run.write_scrape(arm, when, scrape(hits))
    run.write_manifest(Manifest(id=f"synthetic-{n}", kind="replay", status="complete",
                                created=now_iso(), finished=now_iso(), config={"users": 16},
                                arms=arms, traffic=run.traffic_summary(n, None),
                                counts=counts))
    return run
