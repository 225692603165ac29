"""The demo's traffic: a bundled mix, sampled, with the output length capped so the whole
demo fits its time budget on a small CPU machine."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from layergate.exporters.traffic import TrafficRecord, write_traffic
from layergate.harness.scenarios import build_traffic


def capped(records: list[TrafficRecord], max_tokens: int | None) -> list[TrafficRecord]:
    if max_tokens is None:
        return records
    out = []
    for r in records:
        limit = min(r.max_tokens or max_tokens, max_tokens)
        out.append(dataclasses.replace(r, body={**r.body, "max_tokens": limit}))
    return out


def demo_traffic(scenario: str, path: Path, requests: int | None, max_tokens: int | None,
                 rate: float | None, seed: int | None = None) -> Path:
    """Write the replay's input traffic (the mix's arrivals unless `rate` is given; the
    mix's draw unless `seed` is given)."""
    return write_traffic(path, capped(build_traffic(scenario, requests, rate, seed),
                                      max_tokens))


def determinism_sample(records_path: Path, path: Path, prompts: int,
                       max_tokens: int | None) -> Path:
    """The first `prompts` records of the replayed traffic, one of each scenario first."""
    from layergate.exporters.traffic import read_traffic

    records = list(read_traffic(records_path).records)
    first: dict[str, TrafficRecord] = {}
    for r in records:
        first.setdefault(r.scenario, r)
    chosen = list(first.values())[:prompts]
    chosen += [r for r in records if r not in chosen][: prompts - len(chosen)]
    return write_traffic(path, capped(chosen, max_tokens))
