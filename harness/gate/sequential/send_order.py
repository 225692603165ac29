"""What the sequential gate judges: a run's shadow-replay rows and the requests in the
order they were meant to be sent, cut at the first request some arm has not answered yet
(it holds back those sent after it), from a run directory, a loaded `Run`, or rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from layergate.exporters.catalogue import RECORDED
from layergate.exporters.figures.accuracy import Verdicts, read_references, read_verdicts
from layergate.exporters.records import ArmResult
from layergate.exporters.references import Reference, parse_reference
from layergate.harness.rundir import TRAFFIC, Run, RunDir
from layergate.harness.store.results import StoredResult

Source = str | Path | RunDir | Run | Sequence[StoredResult] | Sequence[ArmResult]


@dataclass(frozen=True)
class Requests:
    """The judged requests' rows in send order, and what else the run says."""

    rows: list[ArmResult]
    order: list[str]  # request ids in send order (the prefix every arm answered)
    status: str | None
    determinism: list[ArmResult] | None
    config: dict[str, Any]
    tokenizer: str | None = None
    # request id -> the time it was meant to be sent (the saturation check's send times);
    # empty when the rows do not say
    sent: dict[str, float] = field(default_factory=dict)
    # the open-loop replay's cap on requests in flight, as its manifest records it (None: a
    # closed loop, or rows without a manifest)
    in_flight_limit: int | None = None
    # request id -> its reference (the accuracy figures); empty when the traffic has none
    references: dict[str, Reference] = field(default_factory=dict)
    # a judge's verdicts, for references of kind `judge` (accuracy.read_verdicts)
    verdicts: Verdicts = field(default_factory=dict)


def send_order(stored: Sequence[StoredResult] | Sequence[ArmResult],
                arms: Sequence[str] | None
                ) -> tuple[list[ArmResult], list[str], dict[str, float]]:
    """The rows of the shadow replay, the longest prefix of requests, in the order they
    were meant to be sent (their earliest intended time; else the order rows came in),
    that every arm has answered, and those requests' intended times (where stored)."""
    first: dict[str, tuple[float, int]] = {}
    by_request: dict[str, dict[str, ArmResult]] = {}
    for i, row in enumerate(stored):
        r, at = (row.result, row.intended_at) if isinstance(row, StoredResult) else (row, None)
        if r.repeat != 0 or r.arm == RECORDED:
            continue
        by_request.setdefault(r.request_id, {})[r.arm] = r
        key = (np.inf if at is None else at, i)
        first[r.request_id] = min(first.get(r.request_id, key), key)
    needed = set(arms) if arms else {a for rows in by_request.values() for a in rows}
    order = []
    for rid in sorted(first, key=first.__getitem__):
        if not needed <= set(by_request[rid]):
            break  # still in flight: later requests wait for it
        order.append(rid)
    rows = [r for rid in order for r in by_request[rid].values()]
    sent = {rid: float(first[rid][0]) for rid in order if np.isfinite(first[rid][0])}
    return rows, order, sent


def load(source: Source) -> Requests:
    if isinstance(source, str | Path):
        source = RunDir(source)
    if isinstance(source, RunDir):
        manifest = source.read_manifest()
        with source.open_store(create=False) as store:
            stored = store.rows()
        det = source.determinism
        determinism = None
        if det.path.is_dir() and det.results_path.is_file():
            with det.open_store(create=False) as store:
                determinism = store.results()
        rows, order, sent = send_order(stored, list(manifest.arms))
        traffic = source.path / TRAFFIC
        references = read_references(traffic) if traffic.is_file() else {}
        return Requests(rows, order, manifest.status, determinism, manifest.config,
                         manifest.config.get("tokenizer"), sent, manifest.in_flight_limit,
                         references, read_verdicts(source.path) if references else {})
    if isinstance(source, Run):
        rows, order, _ = send_order(source.results, list(source.manifest.arms))
        determinism = source.determinism.results if source.determinism else None
        # a loaded run's results carry no intended times: its traffic's offsets, as the
        # fixed gate's saturation check reads them
        sent = {t.id: t.offset_s for t in source.traffic.records} if source.traffic else {}
        references = {t.id: parse_reference(t.reference) for t in source.traffic.records
                      if t.reference is not None} if source.traffic else {}
        return Requests(rows, order, source.manifest.status, determinism,
                         source.manifest.config, source.tokenizer, sent,
                         source.manifest.in_flight_limit, references,
                         read_verdicts(source.path) if references else {})
    rows, order, sent = send_order(list(source), None)
    return Requests(rows, order, None, None, {}, None, sent)


def default_budget(config: dict[str, Any]) -> int | None:
    """The budget a run was replayed --until-decided with (its manifest's config)."""
    return config.get("budget") if config.get("until_decided") else None
