"""The only reader of run directories (layout in docs/CONTRACTS.md).

`load_run(path)` returns everything a run holds as plain data; anything missing or
unreadable raises `RunDirError` (the CLI maps it to exit code 4, infrastructure error).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from exporters.recorded import recorded_results
from exporters.records import ArmResult, MetricsScrape
from exporters.traffic import TrafficError, TrafficFile, read_traffic
from harness.manifest import MANIFEST, Manifest, parse_manifest
from harness.store import ResultStore, StoreError

RESULTS = "results.sqlite"
TRAFFIC = "traffic.jsonl"
SCRAPES = "scrapes"
DETERMINISM = "determinism"
EXIT_CODE = 4


class RunDirError(RuntimeError):
    """A run directory that cannot be read; the message says what and where."""

    exit_code = EXIT_CODE


@dataclass(frozen=True)
class Run:
    path: Path
    manifest: Manifest
    results: list[ArmResult]
    scrapes: list[MetricsScrape]
    traffic: TrafficFile | None
    determinism: Run | None = None

    @property
    def complete(self) -> bool:
        return self.manifest.status == "complete"

    def results_with_recorded(self) -> list[ArmResult]:
        """`results` plus a row on arm `recorded` for each replayed request whose traffic line
        carries a recorded response: the rows both `metrics` and `gate` compute figures from.
        A malformed recorded response raises RunDirError."""
        if self.traffic is None:
            return list(self.results)
        try:
            recorded = recorded_results((t.id, t.scenario, t.response)
                                        for t in self.traffic.records)
        except ValueError as exc:
            raise RunDirError(f"{self.path / TRAFFIC}: {exc}") from exc
        # a request the run never replayed would only add an empty row, and with it perhaps
        # a scenario whose every figure is not computable
        replayed = {r.request_id for r in self.results}
        return [*self.results, *(r for r in recorded if r.request_id in replayed)]


def scrape_path(run_dir: str | Path, arm: str, when: str) -> Path:
    return Path(run_dir) / SCRAPES / f"{arm}-{when}.prom"


def _read_scrapes(run_dir: Path) -> list[MetricsScrape]:
    scrapes = []
    for path in sorted((run_dir / SCRAPES).glob("*.prom")):
        arm, _, when = path.stem.rpartition("-")
        if when not in ("before", "after") or not arm:
            raise RunDirError(f"{path}: scrape files are named <arm>-before.prom / "
                              "<arm>-after.prom")
        scrapes.append(MetricsScrape(arm, when, path.read_text(encoding="utf-8")))
    return scrapes


def _read_manifest(run_dir: Path) -> Manifest:
    path = run_dir / MANIFEST
    try:
        return parse_manifest(json.loads(path.read_text(encoding="utf-8")), str(path))
    except FileNotFoundError as exc:
        raise RunDirError(f"{run_dir}: not a run directory (no {MANIFEST})") from exc
    except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise RunDirError(f"{path}: unreadable manifest: {exc}") from exc


def load_run(path: str | Path) -> Run:
    """Read a run directory: manifest, results, scrapes, traffic and `determinism/` if any."""
    run_dir = Path(path)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: no such run directory")
    manifest = _read_manifest(run_dir)
    try:
        with ResultStore(run_dir / RESULTS, create=False) as store:
            results = store.results()
    except StoreError as exc:
        raise RunDirError(str(exc)) from exc
    traffic = None
    if (run_dir / TRAFFIC).is_file():
        try:
            traffic = read_traffic(run_dir / TRAFFIC)
        except TrafficError as exc:
            raise RunDirError(f"run traffic is invalid: {exc}") from exc
    determinism = None
    if (run_dir / DETERMINISM).is_dir():
        determinism = load_run(run_dir / DETERMINISM)
    return Run(run_dir, manifest, results, _read_scrapes(run_dir), traffic, determinism)
