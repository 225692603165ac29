"""One tool's run into a run directory as one arm: read, checked against the arms already
there (comparable.py), stored as `ArmResult`s under request ids that pair the arms by
prompt, and recorded in the manifest's `imported` (docs/CONTRACTS.md, "Run directory")."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters.catalogue import (
    COMPLETE,
    PAIRED,
    REFERENCE_ARMS,
    UNPAIRED,
    check_candidate_name,
    run_arms,
)
from layergate.exporters.figures.columns import ResultColumns
from layergate.exporters.records import ArmResult
from layergate.harness.manifest import IMPORTED, Manifest
from layergate.harness.results_import import tools
from layergate.harness.results_import.comparable import compare, prompts_mismatch, refuse
from layergate.harness.results_import.model import ImportedRun, ResultsError
from layergate.harness.rundir import RunDir

SCENARIO = "imported"  # every imported request's scenario: one tool run is one population


@dataclass(frozen=True)
class ResultsImportConfig:
    tool: str = field(metadata={"help": "The tool that wrote SOURCE.",
                                "choices": tools.names})
    source: Path = field(metadata={"help": "The tool's output (per tool: docs/FORMATS.md, "
                                           "\"Imported results\")."})
    out: Path = field(metadata={"help": "The run directory to add the arm to (made by the "
                                        "first import)."})
    arm: str = field(metadata={"help": "The arm this run is: baseline, baseline2 (the "
                                       "noise floor: the baseline run again) or a "
                                       "candidate's name."})
    allow: bool = field(default=False, metadata={
        "help": "Import an arm whose settings differ from the run's arms (a warning in "
                "every report says which) instead of refusing it (exit 2)."})
    benchmark: int | None = field(default=None, metadata={
        "help": "guidellm: which benchmark of the report (0-based), when it has several.",
        "min": 0})


@dataclass(frozen=True)
class Imported:
    """What an import did, for the command to say."""

    run: ImportedRun
    arm: str
    run_dir: Path
    pairing: str
    warnings: tuple[str, ...]
    unchecked: tuple[str, ...]


def import_results(config: ResultsImportConfig) -> Imported:
    """Add `config.source` to `config.out` as arm `config.arm`."""
    _check_arm(config.arm)
    imported = tools.read(config.tool, config.source, config.benchmark)
    run_dir = RunDir(config.out)
    manifest = _existing(run_dir, config.arm)
    before = dict(manifest.imported.get("arms", {})) if manifest else {}
    rows = _results(imported, config.arm)
    store = run_dir.open_store(create=True)
    try:
        ids = _identified(store.columns(), before) if before else {}
        ours = {r.request_id for r in rows} if imported.prompts_from != "none" else None
        mismatches, unchecked = compare(config.arm, imported.settings,
                                        {a: v["settings"] for a, v in before.items()})
        on_prompts, unknown = prompts_mismatch(config.arm, ours, ids)
        mismatches, unchecked = [*mismatches, *on_prompts], [*unchecked, *unknown]
        if not config.allow:
            refuse(config.arm, mismatches)
        store.put_many(rows)
        counts = store.counts_by_arm()
    finally:
        store.close()
    warnings = [m.words(config.arm) for m in mismatches]
    arms = {**before, config.arm: {**_record(imported, len(rows)),
                                   "same_prompts": bool(ours is not None and not on_prompts
                                                        and not unknown)}}
    # paired when every arm sent prompts known to be the first arm's (few extra or missing)
    pairing = PAIRED if all(a.get("same_prompts") for a in arms.values()) else UNPAIRED
    section = {"arms": arms, "pairing": pairing,
               "warnings": [*(manifest.imported.get("warnings", []) if manifest else []),
                            *warnings]}
    _write_manifest(run_dir, manifest, config, imported, section, counts)
    return Imported(imported, config.arm, run_dir.path, pairing, tuple(warnings),
                    tuple(unchecked))


def _check_arm(arm: str) -> None:
    if arm in REFERENCE_ARMS:
        return
    try:
        check_candidate_name(arm)
    except ValueError as exc:
        raise ResultsError(f"--arm: {exc}") from exc


def _existing(run_dir: RunDir, arm: str) -> Manifest | None:
    if not run_dir.exists():
        return None
    manifest = run_dir.read_manifest()
    if manifest.kind != IMPORTED:
        raise ResultsError(f"{run_dir.path}: a {manifest.kind} run; import results into a "
                           "directory of imported arms (a new one)")
    if arm in manifest.arms:
        raise ResultsError(f"{run_dir.path}: arm {arm!r} is already imported (from "
                           f"{manifest.imported['arms'][arm]['source']})")
    return manifest


def _results(run: ImportedRun, arm: str) -> list[ArmResult]:
    """Each request as a result, its id the prompt's identity (and which occurrence of it),
    so arms that sent the same prompts line up; without one, the arm's own index."""
    seen: Counter[str] = Counter()
    out = []
    for i, r in enumerate(run.requests):
        if r.prompt_key is None:
            rid = f"{arm}/{i}"
        else:
            rid = f"{r.prompt_key}#{seen[r.prompt_key]}"
            seen[r.prompt_key] += 1
        out.append(ArmResult(
            request_id=rid, arm=arm, scenario=SCENARIO, ok=r.ok, error=r.error,
            ttft_s=r.ttft_s, e2e_s=r.e2e_s, itl_s=r.itl_s, output_text=r.output_text,
            output_tokens=r.output_tokens, prompt_tokens=r.prompt_tokens,
            max_tokens=r.max_tokens, tokens_from=r.tokens_from, send_lag_s=r.send_lag_s))
    return out


def _record(run: ImportedRun, count: int) -> dict[str, Any]:
    return {"tool": run.tool, "version": run.version, "source": run.source,
            "target": run.target, "requests": count, "settings": dict(run.settings),
            "prompts_from": run.prompts_from, "not_recorded": list(run.not_recorded),
            "text_saved": all(r.text_saved for r in run.requests)}


def _identified(columns: ResultColumns, arms: dict[str, dict[str, Any]]
                ) -> dict[str, set[str] | None]:
    """Each arm's request ids where they are its prompts' identities (None: not known)."""
    ids = columns.request_id.astype(str)
    return {arm: (set(ids[columns.arm == arm].tolist())
                  if record["prompts_from"] != "none" else None)
            for arm, record in arms.items()}


def _write_manifest(run_dir: RunDir, manifest: Manifest | None, config: ResultsImportConfig,
                    run: ImportedRun, section: dict[str, Any],
                    counts: dict[str, dict[str, int]]) -> None:
    names = [*(manifest.arms if manifest else {}), config.arm]
    order = [a for a in run_arms(()) if a in names] + [a for a in names
                                                        if a not in REFERENCE_ARMS]
    target = run.target or f"{run.tool}:{run.source}"
    arms = {a: (manifest.arms[a] if manifest and a in manifest.arms else target)
            for a in order}
    imports = [*(manifest.config.get("imports", []) if manifest else []),
               {k: str(v) if isinstance(v, Path) else v
                for k, v in dataclasses.asdict(config).items()}]
    count = max((r["requests"] for r in section["arms"].values()), default=0)
    traffic = {"path": None, "count": count, "source": None,
               # one digest of the prompts when every arm sent the same: `compare` pairs
               # two imported runs request by request only then
               "sha256": next(iter(section["arms"].values()))["settings"]["prompts"]
               if section["pairing"] == PAIRED else None}
    fresh = manifest or Manifest.new(IMPORTED, {}, {}, traffic)
    written = dataclasses.replace(fresh, config={"imports": imports}, arms=arms,
                                  traffic=traffic, imported=section)
    run_dir.write_manifest(written.with_status(COMPLETE, counts))
