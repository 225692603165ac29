"""A run directory as one object (layout in docs/CONTRACTS.md): `RunDir` knows where every
file of a run lives and is the only code that reads or writes them — the manifest, the
traffic, the store, the scrapes, Locust's files and the `determinism/` sub-run.

`RunDir(path).load()` (or `load_run(path)`) returns everything a run holds as plain data.
Anything missing or unreadable raises `RunDirError`, which carries exit code 4
(infrastructure error). Directories written by earlier versions load unchanged: reading
creates nothing.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from layergate.exporters import tokenizer
from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.catalogue import COMPLETE
from layergate.exporters.errors import InfrastructureError
from layergate.exporters.figures.answer_tally import Tally
from layergate.exporters.figures.columns import ResultColumns, concat, from_results, select
from layergate.exporters.figures.recorded import recorded_results
from layergate.exporters.figures.schedule_lag import ScheduleLag, schedule_lag
from layergate.exporters.records import ArmResult, MetricsScrape
from layergate.exporters.traffic import (
    Schedule,
    TrafficError,
    TrafficFile,
    TrafficRecord,
    read_schedule,
    read_traffic,
    traffic_sha256,
    write_traffic,
)
from layergate.harness.manifest import Manifest, parse_manifest
from layergate.harness.store import ResultStore, StoreError
from layergate.harness.store.outputs import rowids
from layergate.harness.store.scan import Scan

MANIFEST = "manifest.json"
RESULTS = "results.sqlite"
TRAFFIC = "traffic.jsonl"
# requests the reports show one by one (plots, diffs) at most: above, a seeded sample
SHOWN_REQUESTS = 20_000
SHOWN_SEED = 0
SCRAPES = "scrapes"
DETERMINISM = "determinism"
WORKERS = "workers.json"  # the replay master's record of its workers (written while it runs)
LOCUST = "locust"  # Locust's --csv prefix: locust_stats.csv, locust_failures.csv, ...
SCRAPE_TIMES = ("before", "after")


class RunDirError(InfrastructureError, RuntimeError):
    """A run directory that cannot be read; the message says what and where (a command
    ends with ExitCode.INFRASTRUCTURE)."""


class LazyResults(Sequence[ArmResult]):
    """Results as `ArmResult`s, made on first use by `read`: figures read the store as
    columns and never need them; reports that show single requests do (a sample of them
    above `SHOWN_REQUESTS`, `Run.shown`)."""

    def __init__(self, read: Callable[[], list[ArmResult]]) -> None:
        self._read = read

    @functools.cached_property
    def _rows(self) -> list[ArmResult]:
        return self._read()

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, i):  # type: ignore[override]
        return self._rows[i]

    def __iter__(self) -> Iterator[ArmResult]:
        return iter(self._rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class _Kept:
    """A run's store read for what outlives the figures' columns (`Run.release_columns`)."""

    tallies: list[Tally]
    send_lag: np.ndarray  # every row's send lag, s (NaN: not recorded)
    repeated: np.ndarray  # rowids of the repeat suite's rows
    request_ids: np.ndarray  # the replay's request ids, distinct, sorted (unviewed)
    request_code: np.ndarray  # each replay row's index into them
    rowids: np.ndarray  # each replay row's rowid


@dataclass(frozen=True)
class Run:
    path: Path
    manifest: Manifest
    results: Sequence[ArmResult]  # read from the store on first use (LazyResults)
    scrapes: list[MetricsScrape]
    determinism: Run | None = None
    # the run seen with its arms renamed (a name -> None leaves that arm out): one candidate
    # of several judged as the arm `candidate` (harness.gate.fixed.family); `results` is given so
    view: Callable[[str], str | None] | None = None

    def seen_as(self, view: Callable[[str], str | None], **changes: Any) -> Run:
        """This run through `view` (its store read once for every view of it)."""
        seen = replace(self, view=view, **changes)
        seen.__dict__["_stored"] = self._stored  # cached_property's slot: shared, not re-read
        return seen

    @functools.cached_property
    def traffic(self) -> TrafficFile | None:
        """The run's traffic, every record validated (read on first use); None without."""
        run = RunDir(self.path)
        return run.read_traffic() if run.traffic_path.is_file() else None

    @functools.cached_property
    def schedule(self) -> Schedule | None:
        """What figures need of the traffic (offsets, recorded responses), read lean."""
        path = self.path / TRAFFIC
        if not path.is_file():
            return None
        try:
            return read_schedule(path)
        except TrafficError as exc:
            raise RunDirError(f"run traffic is invalid: {exc}") from exc

    @property
    def complete(self) -> bool:
        return self.manifest.status == COMPLETE

    @property
    def tokenizer(self) -> str | None:
        """The tokenizer the run counted tokens with (its --tokenizer, else an arm's model
        name found locally), to compare outputs in tokens; None when there was none."""
        config = self.manifest.config
        if config.get("tokenizer"):
            return config["tokenizer"]
        found = tokenizer.for_arms(self.manifest.arms, config.get("models") or {}, None)
        return next(iter(found.values()), None)

    def _store(self) -> ResultStore:
        try:
            return ResultStore(self.path / RESULTS, create=False)
        except StoreError as exc:
            raise RunDirError(str(exc)) from exc

    @functools.cached_property
    def _stored(self) -> Scan:
        """The store read once for everything below (layergate.harness.store.scan)."""
        with self._store() as store:
            return store.scan()

    @functools.cached_property
    def _scan(self) -> Scan:
        """The store's scan through the run's view."""
        scan, view = self._stored, self.view
        if view is None:
            return scan
        arms = np.array([view(a) for a in scan.replay.arm], dtype=object)
        keep = np.array([a is not None for a in arms], dtype=bool)
        tallies = [replace(t, arm=view(t.arm)) for t in scan.tallies if view(t.arm) is not None]
        return replace(scan, replay=select(scan.replay, keep, arms[keep]), tallies=tallies)

    @functools.cached_property
    def _kept(self) -> _Kept:
        """What is read of the store besides the figures' columns, kept when they go."""
        scan, stored = self._scan, self._stored
        ids, code = stored.replay.codes("request_id")
        return _Kept(scan.tallies, scan.send_lag, scan.repeated, ids, code,
                     rowids(stored.replay))

    def release_columns(self) -> None:
        """Let the replay's columns go (a million rows take a GB) once the figures hold what
        they need of them; what else is read of the store stays. A later use reads the store
        again."""
        self._kept  # noqa: B018 - computed while the columns are still here
        for cached in ("_scan", "_stored"):
            self.__dict__.pop(cached, None)

    @property
    def tallies(self) -> list[Tally]:
        """Every answer counted by arm, scenario, ok, token source and quirks."""
        return self._kept.tallies

    @functools.cached_property
    def send_lag(self) -> ScheduleLag | None:
        """How late the run's sends went out (every row's `send_lag_s`); None when no row
        recorded it."""
        lags = self._kept.send_lag
        return schedule_lag(lags[~np.isnan(lags)])

    @property
    def result_count(self) -> int:
        return sum(t.count for t in self.tallies)

    def shown(self, limit: int | None = None) -> tuple[Sequence[ArmResult], int | None]:
        """The results the reports show request by request, and how many requests they were
        drawn from (None: all of them). Above `limit` (default SHOWN_REQUESTS) replayed
        requests: every row of `limit` requests drawn without replacement by numpy's
        default_rng(SHOWN_SEED) from the sorted request ids, read when first used, so a
        million-request run is never held as objects."""
        kept = self._kept
        limit = SHOWN_REQUESTS if limit is None else limit
        if len(kept.request_ids) <= limit:
            return self.results, None
        picked = np.zeros(len(kept.request_ids), dtype=bool)
        picked[np.random.default_rng(SHOWN_SEED).choice(len(kept.request_ids), size=limit,
                                                           replace=False)] = True
        return LazyResults(functools.partial(self._rows_at, kept.rowids[picked[
            kept.request_code]])), len(kept.request_ids)

    def _rows_at(self, rowids: np.ndarray) -> list[ArmResult]:
        """The rows `rowids`, through the run's view."""
        with self._store() as store:
            rows = store.results_at(rowids)
        if self.view is None:
            return rows
        return [replace(r, arm=self.view(r.arm)) for r in rows if self.view(r.arm) is not None]

    def repeated(self) -> list[ArmResult]:
        """The rows of prompts the run itself sent more than once (a repeat suite)."""
        return self._rows_at(self._kept.repeated) if len(self._kept.repeated) else []

    def columns_with_recorded(self) -> ResultColumns:
        """The shadow replay's rows as columns, plus a row on arm `recorded` for each
        replayed request whose traffic line carries a recorded response: the rows both
        `metrics` and `gate` compute figures from. A malformed recorded response raises
        RunDirError."""
        replay = self._scan.replay
        if self.schedule is None:
            return replay
        try:
            recorded = recorded_results(self.schedule.recorded)
        except ValueError as exc:
            raise RunDirError(f"{self.path / TRAFFIC}: {exc}") from exc
        if not recorded:
            return replay
        # a request the run never replayed would only add an empty row, and with it perhaps
        # a scenario whose every figure is not computable
        replayed = set(replay.request_id.tolist())
        return concat([replay, from_results(r for r in recorded if r.request_id in replayed)])


class RunDir:
    """The files of one run directory. Creating the object touches nothing on disk."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # where things are
    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS

    @property
    def traffic_path(self) -> Path:
        return self.path / TRAFFIC

    @property
    def scrapes_dir(self) -> Path:
        return self.path / SCRAPES

    def scrape_path(self, arm: str, when: str) -> Path:
        return self.scrapes_dir / f"{arm}-{when}.prom"

    @property
    def determinism(self) -> RunDir:
        """The repeat suite's sub-run (it may not exist yet)."""
        return RunDir(self.path / DETERMINISM)

    @property
    def locust_csv_prefix(self) -> Path:
        return self.path / LOCUST

    @property
    def locust_stats(self) -> Path:
        return self.path / f"{LOCUST}_stats.csv"

    @property
    def locust_log(self) -> Path:
        return self.path / "locust.log"

    @property
    def locust_output(self) -> Path:
        """Locust's stdout and stderr (tracebacks of a crash land here)."""
        return self.path / "locust.out"

    # the manifest
    def exists(self) -> bool:
        """Whether a run was started here (it has a manifest)."""
        return self.manifest_path.is_file()

    def read_manifest(self) -> Manifest:
        path = self.manifest_path
        try:
            return parse_manifest(json.loads(path.read_text(encoding="utf-8")), str(path))
        except FileNotFoundError as exc:
            raise RunDirError(f"{self.path}: not a run directory (no {MANIFEST})") from exc
        except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
            raise RunDirError(f"{path}: unreadable manifest: {exc}") from exc

    def write_manifest(self, manifest: Manifest) -> Path:
        """Atomically (temp file + rename): a crash leaves the old or the new manifest,
        never half of one. Creates the directory."""
        return write_json_atomic(self.manifest_path, manifest.to_json())

    # the replay master's record of its workers
    @property
    def workers_path(self) -> Path:
        return self.path / WORKERS

    def write_workers(self, summary: dict[str, Any]) -> Path:
        """Atomically, like the manifest: the master rewrites it as workers come and go."""
        return write_json_atomic(self.workers_path, summary)

    def read_workers(self) -> dict[str, Any] | None:
        """What the master wrote about its workers; None when it wrote nothing."""
        try:
            return json.loads(self.workers_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise RunDirError(f"{self.workers_path}: unreadable: {exc}") from exc

    # the store
    def open_store(self, create: bool = True) -> ResultStore:
        """The run's store (results and work queue); `create=False` for readers."""
        if create:
            self.path.mkdir(parents=True, exist_ok=True)
        try:
            return ResultStore(self.results_path, create=create)
        except StoreError as exc:
            raise RunDirError(str(exc)) from exc

    # the traffic
    def read_traffic(self) -> TrafficFile:
        try:
            return read_traffic(self.traffic_path)
        except TrafficError as exc:
            raise RunDirError(f"run traffic is invalid: {exc}") from exc

    def write_traffic(self, records: Iterable[TrafficRecord]) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        return write_traffic(self.traffic_path, records)

    def traffic_summary(self, count: int, source: str | None) -> dict[str, Any]:
        """The manifest's `traffic` entry for the `count` records written here."""
        return {"path": str(self.traffic_path), "count": count,
                "sha256": traffic_sha256(self.traffic_path), "source": source}

    # the scrapes
    def has_scrape(self, arm: str, when: str) -> bool:
        return self.scrape_path(arm, when).is_file()

    def write_scrape(self, arm: str, when: str, text: str) -> Path:
        path = self.scrape_path(arm, when)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def read_scrapes(self) -> list[MetricsScrape]:
        scrapes = []
        for path in sorted(self.scrapes_dir.glob("*.prom")):
            arm, _, when = path.stem.rpartition("-")
            if when not in SCRAPE_TIMES or not arm:
                raise RunDirError(f"{path}: scrape files are named <arm>-before.prom / "
                                  "<arm>-after.prom")
            scrapes.append(MetricsScrape(arm, when, path.read_text(encoding="utf-8")))
        return scrapes

    # everything
    def load(self) -> Run:
        """Manifest, results, scrapes, traffic and the `determinism/` sub-run if any."""
        if not self.path.is_dir():
            raise RunDirError(f"{self.path}: no such run directory")
        manifest = self.read_manifest()
        self.open_store(create=False).close()  # a readable store, or RunDirError now
        results = LazyResults(functools.partial(_read_all, self.results_path))
        determinism = self.determinism.load() if self.determinism.path.is_dir() else None
        return Run(self.path, manifest, results, self.read_scrapes(), determinism)


def _read_all(path: Path) -> list[ArmResult]:
    with ResultStore(path, create=False) as store:
        return store.results()


def load_run(path: str | Path) -> Run:
    """Everything a run directory holds (`RunDir(path).load()`)."""
    return RunDir(path).load()
