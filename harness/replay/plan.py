"""What a replay sends and when: the records (from a traffic file or a scenario mix), their
intended offsets (timestamp replay at `speed`, or Poisson at `rate`), and — for a fresh run
or `--resume` — the (record, arms) pairs still missing from the store."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Iterable

from layergate.exporters.traffic import TrafficRecord, read_traffic
from layergate.harness import scenarios
from layergate.harness.replay import own
from layergate.harness.replay.config import ConfigError, ReplayConfig
from layergate.harness.store import QueueEntry

log = logging.getLogger(__name__)


def load_records(config: ReplayConfig) -> list[TrafficRecord]:
    """The records of a fresh run, from its traffic file or scenario, with `offset_s`
    rewritten to the intended schedule, so the run's traffic.jsonl says exactly what was
    sent when."""
    if config.scenario is not None:
        # the mix sets the send times (its arrival process, or --rate); --speed still applies
        records = scenarios.build_traffic(config.scenario, requests=config.requests,
                                          rate=config.rate)
        return _rescale(records, [r.offset_s for r in records], config.speed)
    traffic = read_traffic(config.traffic, skip_invalid=config.skip_invalid)
    for skipped in traffic.skipped:
        log.warning("skipped %s", skipped.reason)
    records = list(traffic.records[: config.requests])
    if not records:
        raise ConfigError(f"{config.traffic}: no valid request to replay")
    if config.rate is not None:
        return _rescale(records, scenarios.poisson_offsets(len(records), config.rate,
                                                           config.seed), 1.0)
    records.sort(key=lambda r: r.offset_s)
    start = records[0].offset_s if records else 0.0
    return _rescale(records, [r.offset_s - start for r in records], config.speed)


def _rescale(records: list[TrafficRecord], offsets: list[float],
             speed: float) -> list[TrafficRecord]:
    return [dataclasses.replace(r, offset_s=round(o / speed, 6))
            for r, o in zip(records, offsets, strict=True)]


def pending_items(records: list[TrafficRecord], arms: Iterable[str],
                  done: set[tuple[str, str]], speed: float = 1.0) -> list[QueueEntry]:
    """Each record with the arms still missing from `done`, in time order, offsets shifted
    to start at 0 and divided by `speed`."""
    arms = tuple(arms)
    items = []
    for record in sorted(records, key=lambda r: r.offset_s):
        missing = tuple(arm for arm in arms if (record.id, arm) not in done)
        if missing:
            items.append(QueueEntry(record, missing, record.offset_s))
    start = items[0].offset_s if items else 0.0
    return [dataclasses.replace(e, offset_s=(e.offset_s - start) / speed) for e in items]


def arm_left(turns: tuple[TrafficRecord, ...], arm: str, ok: set[tuple[str, str]],
             rows: set[tuple[str, str]], ends: Collection[tuple[str, str]],
             retry_errors: bool = True) -> int | None:
    """Own mode: the turn an arm's conversation goes on from, None when nothing is left.
    A turn with an ok answer goes on (unless the conversation ended after it); an error row
    (in `rows`, not in `ok`) cut the conversation there: with `retry_errors` (a resume) the
    turn is sent again, else the cut is its end; a turn with no row is next."""
    for i, record in enumerate(turns):
        key = (record.id, arm)
        if key in ok:
            if key in ends:
                return None
            continue
        return i if retry_errors or key not in rows else None
    return None


def pending_conversations(records: list[TrafficRecord], arms: Iterable[str],
                          ok: set[tuple[str, str]], rows: set[tuple[str, str]],
                          ends: Collection[tuple[str, str]], timeout: float,
                          speed: float = 1.0, retry_errors: bool = True) -> list[QueueEntry]:
    """Own mode: each conversation with the arms that still have turns to send, in the
    order of its first turn, offsets shifted to start at 0 and divided by `speed`; its
    lease runs on for the span of its turns and a timeout per turn."""
    arms = tuple(arms)
    items = []
    for turns in own.conversations(records):
        missing = tuple(arm for arm in arms
                        if arm_left(turns, arm, ok, rows, ends, retry_errors) is not None)
        if missing:
            span = (turns[-1].offset_s - turns[0].offset_s) / speed + timeout * len(turns)
            items.append(QueueEntry(turns[0], missing, turns[0].offset_s, turns, span))
    start = items[0].offset_s if items else 0.0
    return [dataclasses.replace(e, offset_s=(e.offset_s - start) / speed) for e in items]
