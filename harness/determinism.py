"""The repeat suite: send each prompt N times at each concurrency level and store token ids,
latency and the engine-reported peak memory (`layergate.peak_memory_bytes`) per request.

Not a load test, so plain httpx with a thread pool of `concurrency` threads: at level c,
c requests are in flight at once. Results go to the same store as a replay, one row per
(request_id, arm, repeat, concurrency); the manifest's kind is `determinism`.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.progress import Progress

from exporters.records import ArmResult
from exporters.traffic import TrafficRecord, read_traffic, traffic_sha256, write_traffic
from harness.manifest import Manifest, write_manifest
from harness.replay.client import send_request
from harness.rundir import RESULTS, TRAFFIC
from harness.store import ResultStore


class DeterminismError(ValueError):
    pass


@dataclass(frozen=True)
class DeterminismConfig:
    targets: dict[str, str] = field(metadata={
        "help": "Server to test; repeat as ARM=URL for several arms (a bare URL is the arm "
                "`candidate`)."})
    traffic: Path = field(metadata={
        "help": "JSONL traffic file; its first --requests records are the prompts."})
    out: Path = field(metadata={
        "help": "Run directory to create (e.g. RUN_DIR/determinism of a replay run)."})
    repeats: int = field(default=5, metadata={
        "help": "How many times each prompt is sent at each concurrency level.", "min": 2})
    concurrency: tuple[int, ...] = field(default=(1,), metadata={
        "help": "Concurrency levels: requests in flight at once, e.g. 1,4."})
    requests: int | None = field(default=None, metadata={
        "help": "Use only the first K records.", "min": 1})
    timeout: float = field(default=120.0, metadata={
        "help": "Seconds per request.", "min": 0, "min_open": True})
    model: str | None = field(default=None, metadata={
        "help": "`model` to put in every request body."})
    skip_invalid: bool = field(default=False, metadata={
        "help": "Skip (and report) bad traffic lines."})
    progress: bool = field(default=True, metadata={"help": "Show a progress bar."})

    def __post_init__(self) -> None:
        if not self.targets:
            raise DeterminismError("give at least one --target")
        for arm, url in self.targets.items():
            if not url.startswith(("http://", "https://")):
                raise DeterminismError(f"target {arm!r} must be an http(s) URL: {url!r}")
        if self.repeats < 2:
            raise DeterminismError(f"repeats must be >= 2 to compare repeats: {self.repeats}")
        if not self.concurrency or min(self.concurrency) < 1:
            raise DeterminismError(f"concurrency levels must be >= 1: {self.concurrency}")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["traffic"], out["out"] = str(self.traffic), str(self.out)
        out["concurrency"] = list(self.concurrency)
        return out


def _prepare(config: DeterminismConfig) -> list[TrafficRecord]:
    if (config.out / "manifest.json").exists():
        raise DeterminismError(f"{config.out} already holds a run; choose another --out")
    traffic = read_traffic(config.traffic, skip_invalid=config.skip_invalid)
    records = list(traffic.records[: config.requests])
    config.out.mkdir(parents=True, exist_ok=True)
    write_traffic(config.out / TRAFFIC, records)
    return records


def _send_level(client: httpx.Client, config: DeterminismConfig, arm: str, url: str,
                records: list[TrafficRecord], repeat: int, level: int) -> list[ArmResult]:
    def one(record: TrafficRecord) -> ArmResult:
        return send_request(client, url, record, arm, intended=time.perf_counter(),
                            timeout=config.timeout, model=config.model, repeat=repeat,
                            concurrency=level)

    with ThreadPoolExecutor(max_workers=level) as pool:
        return list(pool.map(one, records))


def run_determinism(config: DeterminismConfig) -> Path:
    """Run the repeat suite; returns the run directory (status complete or interrupted)."""
    records = _prepare(config)
    manifest = Manifest.new("determinism", config.to_json(), dict(config.targets),
                            {"path": str(config.out / TRAFFIC), "count": len(records),
                             "sha256": traffic_sha256(config.out / TRAFFIC),
                             "source": str(config.traffic)})
    write_manifest(config.out, manifest)
    store = ResultStore(config.out / RESULTS)
    total = len(config.targets) * len(config.concurrency) * config.repeats * len(records)
    status = "interrupted"
    limits = httpx.Limits(max_connections=max(config.concurrency) * 2)
    try:
        with httpx.Client(timeout=config.timeout, limits=limits) as client, \
                Progress(disable=not config.progress) as bar:
            task = bar.add_task("determinism", total=total)
            for arm, url in config.targets.items():
                for level in config.concurrency:
                    for repeat in range(config.repeats):
                        for result in _send_level(client, config, arm, url, records, repeat,
                                                  level):
                            store.put(result)
                        bar.advance(task, len(records))
        status = "complete"
    finally:
        write_manifest(config.out, manifest.with_status(status, store.counts_by_arm()))
        store.close()
    return config.out
