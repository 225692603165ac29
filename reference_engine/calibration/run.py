"""`calibrate`: profile -> sweep -> choose -> rules file + report (CSVs and PNGs)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from layergate.exporters.atomic import write_json_atomic
from layergate.reference_engine.calibration import calibration_plots, choose, sweep
from layergate.reference_engine.calibration.config import CalibrationConfig
from layergate.reference_engine.calibration.profile import (
    LayerProfile,
    profile_layers,
    rank_by_influence,
    write_layers_csv,
)
from layergate.reference_engine.calibration.prompts import load_prompts
from layergate.reference_engine.calibration.reference import LayerTimer, generate
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.loading import load_model
from layergate.reference_engine.runner import ModelRunner
from layergate.reference_engine.skip_policies.detector import detect
from layergate.reference_engine.skip_policies.rules import RulesFile, save_rules
from layergate.reference_engine.skip_policies.speculative import eos_ids


@dataclass(frozen=True)
class CalibrationResult:
    rules: RulesFile
    rules_path: Path
    profile: tuple[LayerProfile, ...]
    report_files: tuple[Path, ...]
    notes: tuple[str, ...]


Progress = Callable[[str, int], Callable[[], None]]  # (stage, total) -> tick


def calibrate(cfg: CalibrationConfig, progress: Progress | None = None) -> CalibrationResult:
    progress = progress or (lambda stage, total: lambda: None)
    loaded = load_model(EngineConfig(model=cfg.model, threads=cfg.threads, device="cpu"))
    runner = ModelRunner(loaded.model)
    traffic = load_prompts(cfg.traffic, loaded.tokenizer, max_prompts=cfg.max_prompts,
                           max_tokens=cfg.max_tokens, vocab_size=runner.vocab_size)
    eos = _eos(loaded)
    with torch.inference_mode():
        timer = LayerTimer(runner)
        tick = progress("full-depth references", len(traffic.prompts))
        refs = []
        for prompt in traffic.prompts:
            refs.append(generate(runner, prompt, eos, timer))
            tick()
        timer.close()
        n = runner.num_layers
        tick = progress("layer profile", len(refs) + min(cfg.drift_prompts, len(refs)) * n)
        profile = profile_layers(runner, refs, timer.layer_s, timer.head_s, cfg.drift_prompts,
                                 tick)
        ranking = rank_by_influence(profile)
        ks = tuple(k for k in cfg.skip_counts if 0 < k < n)
        tick = progress("dynamic sweep", (len(ks) + 1) * len(refs))
        matches = sweep.match_by_k(runner, refs, ranking, (0, *ks), tick)
        # k=0 is full depth: a teacher-forced pass must reproduce every reference output
        sanity = sum(matches.pop(0))
        features = [detect(runner.embed_tokens(r.prompt.prompt_ids)) for r in refs]
        cells = sweep.dynamic_grid(features, matches)
        spec = _speculative_sweep(runner, refs, ranking, cfg, progress)
    dyn_rules, dyn_cell, dyn_note = choose.choose_dynamic(cells, ranking, cfg.target_consistency)
    static_skip, static_rate, static_note = choose.choose_static(matches, ranking,
                                                                 cfg.target_consistency)
    draft, spec_cell, spec_note = choose.choose_speculative(spec)
    notes = (dyn_note, static_note, spec_note,
             f"teacher-forced full depth reproduces {sanity}/{len(refs)} reference outputs",
             f"chosen on {len(refs)} prompts of {traffic.path.name}, <= {cfg.max_tokens} "
             "greedy tokens each; check on held-out traffic with `layergate replay`")
    info = {
        "dynamic": {"target_consistency": cfg.target_consistency,
                    "chosen": asdict(dyn_cell) if dyn_cell else None},
        "static": {"exact_match": static_rate, "ranking": list(ranking),
                   "exact_match_by_k": {str(k): sum(v) / len(v) for k, v in matches.items()}},
        "speculative": {"chosen": asdict(spec_cell) if spec_cell else None,
                        "beats_full": bool(spec_cell and spec_cell.speedup_vs_full > 1.0)},
    }
    info["dynamic"]["chosen"] = _finite(info["dynamic"]["chosen"])
    rules = RulesFile(
        model=loaded.name, num_layers=n,
        created=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        traffic={"path": str(cfg.traffic), "sha256": traffic.sha256, "count": len(refs),
                 "max_tokens": cfg.max_tokens},
        dynamic=dyn_rules, static_skip=static_skip, speculative=draft, info=info, notes=notes)
    rules_path = save_rules(rules, cfg.out)
    files: list[Path] = []
    if cfg.report_dir is not None:
        files = _write_report(cfg.report_dir, profile, cells, spec, rules)
    return CalibrationResult(rules, rules_path, tuple(profile), tuple(files), notes)


def _speculative_sweep(runner: ModelRunner, refs: Sequence[Any], ranking: Sequence[int],
                       cfg: CalibrationConfig, progress: Progress) -> list[sweep.SpecCell]:
    n = runner.num_layers
    depths = [sweep.Draft(skip=tuple(sorted(ranking[:k]))) for k in cfg.draft_skips if 0 < k < n]
    depths += [sweep.Draft(exit_after=e) for e in cfg.draft_exits if e < n - 1]
    heads = [h for h in cfg.head_tokens if h is None or h < runner.vocab_size]
    drafts = [sweep.Draft(d.skip, d.exit_after, h) for d in depths for h in heads]
    repeats = 9
    tick = progress("speculative sweep", len(depths) * len(refs) + repeats)
    cells: list[sweep.SpecCell] = []
    agree = {d: sweep.draft_agreements(runner, refs, d, heads, tick) for d in depths}
    longest = max(refs, key=lambda r: len(r.sequence))
    times = sweep.measure_times(runner, longest, drafts, [g + 1 for g in cfg.gammas],
                                repeats, tick)
    for d in drafts:
        depth = sweep.Draft(d.skip, d.exit_after)
        cells += sweep.spec_cells(d, agree[depth][d.head_tokens], cfg.gammas, times)
    return cells


def _write_report(directory: Path, profile, cells, spec, rules: RulesFile) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    files = [write_layers_csv(profile, directory / "layers.csv"),
             calibration_plots.plot_layers(profile, directory / "layers.png"),
             sweep.write_csv(cells, directory / "sweep.csv"),
             calibration_plots.plot_sweep(cells, directory / "sweep.png"),
             sweep.write_csv(spec, directory / "speculative.csv"),
             calibration_plots.plot_speculative(spec, directory / "speculative.png")]
    summary = directory / "summary.json"
    write_json_atomic(summary, rules.to_json())
    return [*files, summary]


def _finite(d: dict[str, Any] | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in d.items()}


def _eos(loaded: Any) -> set[int]:
    return eos_ids(loaded.model) | ({loaded.tokenizer.eos_token_id}
                                     if loaded.tokenizer.eos_token_id is not None else set())
