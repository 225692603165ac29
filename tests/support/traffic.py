"""Small replay traffic: `n` records of the bundled eval traffic, `spacing` seconds apart,
4 tokens each (a request to the echo server or the real engine takes a moment)."""

from __future__ import annotations

from pathlib import Path

from layergate.exporters.traffic import TrafficRecord, read_traffic, write_traffic
from layergate.harness.scenarios import SCENARIOS_DIR


def traffic(path: Path, n: int, spacing: float) -> Path:
    source = read_traffic(SCENARIOS_DIR / "traffic" / "eval.jsonl").records
    return write_traffic(path, [TrafficRecord(f"d-{i:03d}", i * spacing, r.scenario, r.endpoint,
                                              {**r.body, "max_tokens": 4})
                                for i, r in enumerate(source[i % len(source)]
                                                      for i in range(n))])
