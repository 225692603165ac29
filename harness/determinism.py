"""The determinism suite (`layergate determinism`; "the repeat suite" in prose): send each
prompt N times at each concurrency level and store token ids, latency and the
engine-reported peak memory (`layergate.peak_memory_bytes`) per request, from which
`exporters` compute output, resource and latency determinism.

Not a load test: a thread pool of `concurrency` threads, so at level c, c requests are in
flight at once, each through the replay's own `client.send` (httpx transport, the same
deadline and latency definitions). Results go to the same store as a replay, one row per
(request_id, arm, repeat, concurrency); the manifest's kind is `determinism`.

A prompt that carries a `seed` and samples (temperature absent or above 0) should come back
the same on every repeat; a repeat that differs from the first is marked with the quirk
`seed_ignored` (a server that ignores the seed, or one whose numerics vary with the batch).
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import Progress

from layergate.exporters import tokenizer
from layergate.exporters.catalogue import COMPLETE, INTERRUPTED, SEED_IGNORED, same_output
from layergate.exporters.errors import UsageError
from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord, read_traffic
from layergate.harness.manifest import Manifest
from layergate.harness.replay.client import Target, send
from layergate.harness.replay.config import check_tokenizer
from layergate.harness.replay.httpx_transport import HttpxTransport
from layergate.harness.replay.settings import (
    ConfigError,
    logprobs_field,
    progress_field,
    timeout_field,
    tokenizer_field,
)
from layergate.harness.replay.transport import Transport
from layergate.harness.rundir import RunDir


class DeterminismError(UsageError, ValueError):
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
    timeout: float = timeout_field()
    model: str | None = field(default=None, metadata={
        "help": "`model` to put in every request body."})
    skip_invalid: bool = field(default=False, metadata={
        "help": "Skip (and report) bad traffic lines."})
    progress: bool = progress_field()
    logprobs: int = logprobs_field()
    tokenizer: str | None = tokenizer_field()

    def __post_init__(self) -> None:
        try:
            check_tokenizer(self.tokenizer)
        except ConfigError as exc:
            raise DeterminismError(str(exc)) from exc
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


def _prepare(config: DeterminismConfig, run: RunDir) -> list[TrafficRecord]:
    if run.exists():
        raise DeterminismError(f"{run.path} already holds a run; choose another --out")
    traffic = read_traffic(config.traffic, skip_invalid=config.skip_invalid)
    records = list(traffic.records[: config.requests])
    run.write_traffic(records)
    return records


def _send_level(transport: Transport, config: DeterminismConfig, target: Target,
                records: list[TrafficRecord], repeat: int, level: int) -> list[ArmResult]:
    def one(record: TrafficRecord) -> ArmResult:
        return send(transport, target, record, intended=time.perf_counter(),
                    timeout=config.timeout, repeat=repeat, concurrency=level)

    with ThreadPoolExecutor(max_workers=level) as pool:
        return list(pool.map(one, records))


def seeded_and_sampled(record: TrafficRecord) -> bool:
    """The record asks for a seed and samples: its repeats should all be the same."""
    temperature = record.body.get("temperature")
    return record.body.get("seed") is not None and (temperature is None or temperature > 0)


def mark_seed_ignored(result: ArmResult, first: ArmResult | None,
                      record: TrafficRecord) -> ArmResult:
    """`result` with the quirk `seed_ignored` when it is a repeat of a seeded, sampled
    prompt that answered differently from the first time."""
    if (first is None or result.repeat == 0 or not (result.ok and first.ok)
            or not seeded_and_sampled(record) or same_output(first, result)):
        return result
    return dataclasses.replace(result, quirks=(*result.quirks, SEED_IGNORED))


def run_determinism(config: DeterminismConfig) -> Path:
    """Run the repeat suite; returns the run directory (status complete or interrupted)."""
    run = RunDir(config.out)
    records = _prepare(config, run)
    manifest = Manifest.new("determinism", config.to_json(), dict(config.targets),
                            run.traffic_summary(len(records), str(config.traffic)))
    run.write_manifest(manifest)
    store = run.open_store()
    total = len(config.targets) * len(config.concurrency) * config.repeats * len(records)
    status = INTERRUPTED
    transport = HttpxTransport(max_connections=max(config.concurrency) * 2)
    try:
        with Progress(disable=not config.progress) as bar:
            task = bar.add_task("determinism", total=total)
            models = {arm: config.model for arm in config.targets if config.model}
            tokenizers = tokenizer.for_arms(config.targets, models, config.tokenizer)
            for arm, url in config.targets.items():
                target = Target(arm, url, config.model, config.logprobs, tokenizers.get(arm))
                for level in config.concurrency:
                    first: dict[str, ArmResult] = {}
                    for repeat in range(config.repeats):
                        results = _send_level(transport, config, target, records, repeat, level)
                        for record, result in zip(records, results, strict=True):
                            first.setdefault(record.id, result)
                            store.put(mark_seed_ignored(result, first[record.id], record))
                        bar.advance(task, len(records))
        status = COMPLETE
    finally:
        transport.close()
        run.write_manifest(manifest.with_status(status, store.counts_by_arm()))
        store.close()
    return run.path
