"""`manifest.json` of a run directory (layout in docs/CONTRACTS.md).

Written atomically (temp file + rename) at every status change, so a crash leaves either
the old or the new manifest, never half of one. A run starts `running`; it becomes
`complete` when every (request, arm) has a row in the store, `interrupted` otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

MANIFEST = "manifest.json"
Kind = Literal["replay", "determinism"]
Status = Literal["running", "complete", "interrupted"]
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
    status: Status
    created: str
    config: dict[str, Any]
    arms: dict[str, str]
    traffic: dict[str, Any]
    versions: dict[str, str] = field(default_factory=versions)
    finished: str | None = None
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # e.g. an arm whose /metrics could not be scraped

    @classmethod
    def new(cls, kind: Kind, config: dict[str, Any], arms: dict[str, str],
            traffic: dict[str, Any]) -> Manifest:
        run_id = f"{kind}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
        return cls(run_id, kind, "running", now_iso(), config, arms, traffic)

    def with_status(self, status: Status, counts: dict[str, dict[str, int]]) -> Manifest:
        finished = None if status == "running" else now_iso()
        return dataclasses.replace(self, status=status, counts=counts, finished=finished)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["notes"] = list(self.notes)
        return out


def write_manifest(run_dir: str | Path, manifest: Manifest) -> Path:
    path = Path(run_dir) / MANIFEST
    tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def parse_manifest(obj: Any, where: str) -> Manifest:
    """Build a Manifest from decoded JSON; ValueError naming the bad key."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: the manifest must be a JSON object")
    names = {f.name for f in dataclasses.fields(Manifest)}
    required = ("id", "kind", "status", "created", "config", "arms", "traffic")
    for key in required:
        if key not in obj:
            raise ValueError(f"{where}: missing key {key!r}")
    if obj["kind"] not in ("replay", "determinism"):
        raise ValueError(f"{where}: key 'kind' must be replay or determinism: {obj['kind']!r}")
    if obj["status"] not in ("running", "complete", "interrupted"):
        raise ValueError(f"{where}: key 'status' is not a known status: {obj['status']!r}")
    values = {k: v for k, v in obj.items() if k in names}
    values["notes"] = tuple(values.get("notes", ()))
    return Manifest(**values)


def read_manifest(run_dir: str | Path) -> Manifest:
    path = Path(run_dir) / MANIFEST
    return parse_manifest(json.loads(path.read_text(encoding="utf-8")), str(path))
