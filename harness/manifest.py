"""The manifest of a run (`manifest.json`, layout in docs/CONTRACTS.md): what ran, with
which configuration and versions, and how it ended. `harness.rundir.RunDir` reads and writes
it; this module only says what it holds.

A run starts `running`; it becomes `complete` when every (request, arm) has a row in the
store (an arm in `arms_stopped` only up to where it stopped), `interrupted` otherwise.
"""

from __future__ import annotations

import dataclasses
import platform
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any, Literal, get_args

from layergate.exporters.catalogue import RUN_STATUSES, RUNNING, RunStatus

Kind = Literal["replay", "determinism", "imported"]
IMPORTED = "imported"  # a run of load tools' results (`layergate import-results`)
_PACKAGES = ("layergate", "locust", "httpx", "prometheus-client")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    """Versions that matter to reproduce a run, read from package metadata (no imports)."""
    found = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


@dataclass(frozen=True)
class Manifest:
    id: str
    kind: Kind
    status: RunStatus
    created: str
    config: dict[str, Any]
    arms: dict[str, str]
    traffic: dict[str, Any]
    versions: dict[str, str] = field(default_factory=versions)
    finished: str | None = None
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # e.g. an arm whose /metrics could not be scraped
    # a replay: records sent again after a lease ran out (all invocations of the run)
    resent: int = 0
    # a replay stopped by its `should_stop` hook before every record was sent
    stopped_early: bool = False
    stop_reason: str | None = None
    # a replay: the arms its stop hook stopped sending to while the others went on, arm ->
    # {"reason", "first_unsent" (request id, None: nothing was left), "unsent", "at"}
    arms_stopped: dict[str, dict[str, Any]] = field(default_factory=dict)
    # a replay: the Locust workers its master served (workers.json), across resumes
    workers: dict[str, Any] = field(default_factory=dict)
    # a replay: how far its sends lagged their intended times (exporters/figures/schedule_lag.py)
    schedule: dict[str, Any] = field(default_factory=dict)
    # a replay: its open loop's cap on requests in flight over every worker
    # (ReplayConfig.in_flight_limit, as the last invocation set it); None: a closed loop
    in_flight_limit: int | None = None
    # an imported run: each arm's tool, source and settings, the pairing and the warnings
    # (harness/results_import/write.py; docs/CONTRACTS.md)
    imported: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, kind: Kind, config: dict[str, Any], arms: dict[str, str],
            traffic: dict[str, Any], in_flight_limit: int | None = None) -> Manifest:
        run_id = f"{kind}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
        return cls(run_id, kind, RUNNING, now_iso(), config, arms, traffic,
                   in_flight_limit=in_flight_limit)

    def with_status(self, status: RunStatus, counts: dict[str, dict[str, int]]) -> Manifest:
        finished = None if status == RUNNING else now_iso()
        return dataclasses.replace(self, status=status, counts=counts, finished=finished)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["notes"] = list(self.notes)
        if not self.imported:  # a replay's or a repeat suite's manifest stays as it was
            del out["imported"]
        return out

    def counts_text(self) -> str:
        """e.g. `baseline 4 ok / 0 error, candidate 3 ok / 1 error`"""
        return ", ".join(f"{arm} {c['ok']} ok / {c['error']} error"
                         for arm, c in sorted(self.counts.items()))


def parse_manifest(obj: Any, where: str) -> Manifest:
    """Build a Manifest from decoded JSON; ValueError naming the bad key."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: the manifest must be a JSON object")
    names = {f.name for f in dataclasses.fields(Manifest)}
    required = ("id", "kind", "status", "created", "config", "arms", "traffic")
    for key in required:
        if key not in obj:
            raise ValueError(f"{where}: missing key {key!r}")
    if obj["kind"] not in get_args(Kind):
        raise ValueError(f"{where}: key 'kind' must be one of {', '.join(get_args(Kind))}: "
                         f"{obj['kind']!r}")
    if obj["status"] not in RUN_STATUSES:
        raise ValueError(f"{where}: key 'status' is not a known status: {obj['status']!r}")
    values = {k: v for k, v in obj.items() if k in names}
    values["notes"] = tuple(values.get("notes", ()))
    if "in_flight_limit" not in obj and obj["kind"] == "replay":
        values["in_flight_limit"] = _unrecorded_in_flight_limit(obj["config"])
    limit = values.get("in_flight_limit")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ValueError(f"{where}: key 'in_flight_limit' must be a positive integer or null: "
                         f"{limit!r}")
    return Manifest(**values)


def _unrecorded_in_flight_limit(config: Any) -> int | None:
    """The in-flight limit of a replay whose manifest predates `in_flight_limit`: derived
    from its config as ReplayConfig.locust_users did for local processes. Such manifests
    recorded no other hosts' workers' share, so only for them; a manifest with the key is
    read as it is."""
    if not isinstance(config, dict) or config.get("users") is not None:
        return None
    limit, processes = config.get("max_in_flight"), config.get("processes") or 1
    if not isinstance(limit, int) or limit < 1 or not isinstance(processes, int):
        return None
    users = max(limit, processes)
    return users + (-users) % processes
