"""`CalibrationConfig`: what `layergate calibrate` measures and chooses with (torch-free, so
the CLI builds its options from these fields)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from layergate.reference_engine.config import DEFAULT_MODEL


@dataclass(frozen=True)
class CalibrationConfig:
    traffic: Path = field(metadata={
        "help": "Calibration traffic (JSONL traffic format); real prompts, never templates."})
    out: Path = field(metadata={
        "help": "Rules file to write (e.g. scenarios/rules/smollm2-135m.json)."})
    report_dir: Path | None = field(default=None, metadata={
        "help": "Directory for layers.csv/png, sweep.csv/png, speculative.csv/png."})
    target_consistency: float = field(default=0.99, metadata={
        "help": "Least share of whole greedy outputs that must stay identical to full depth "
                "for a dynamic / static setting to be chosen.", "min": 0.0, "max": 1.0})
    max_prompts: int = field(default=24, metadata={
        "help": "Use the first N requests of the traffic.", "min": 1})
    max_tokens: int = field(default=24, metadata={
        "help": "Greedy tokens per request at most (the request's own max_tokens if lower).",
        "min": 2})
    drift_prompts: int = field(default=6, metadata={
        "help": "Prompts used for the per-layer drift (30 extra passes each).", "min": 0})
    skip_counts: tuple[int, ...] = field(default=(1, 2, 3, 4, 6, 8), metadata={
        "help": "Layers skipped (least influential first) tried by the dynamic sweep."})
    draft_skips: tuple[int, ...] = field(default=(4, 6, 8, 10), metadata={
        "help": "Speculative drafts that skip this many least influential layers."})
    draft_exits: tuple[int, ...] = field(default=(19, 23), metadata={
        "help": "Speculative drafts that exit after this layer index (empty: none)."})
    head_tokens: tuple[int | None, ...] = field(default=(None, 8192), metadata={
        "help": "Draft LM heads tried: the full vocabulary (None) or cut to the first N ids."})
    gammas: tuple[int, ...] = field(default=(1, 2, 3, 4, 6), metadata={
        "help": "Draft lengths tried for speculative."})
    model: str = field(default=DEFAULT_MODEL, metadata={
        "help": f"`{DEFAULT_MODEL}` or a local Hugging Face Llama-family directory."})
    threads: int = field(default=1, metadata={
        "help": "torch threads (timings in the report are measured with this many).",
        "min": 0})
