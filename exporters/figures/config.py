"""The one configuration object every calculator receives."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from layergate.exporters.catalogue import CANDIDATE


@dataclass(frozen=True)
class MetricsConfig:
    """How figures are computed; recorded beside them so a verdict can be reproduced."""

    n_resamples: int = field(default=1000, metadata={
        "help": "Bootstrap resamples behind every CI.", "min": 1})
    seed: int = field(default=0, metadata={"help": "Seed of the bootstrap resampler."})
    confidence: float = field(default=0.95, metadata={"help": "confidence level of the CIs"})
    min_samples: int = field(default=20, metadata={
        "help": "Fewer paired requests than this make a figure `insufficient`.", "min": 1})
    min_determinism_prompts: int = field(
        default=5, metadata={"help": "fewer repeated prompts than this: `insufficient`"})
    termination_tolerance: int = field(
        default=2, metadata={"help": "tokens B may stop before / after A and still be correct"})
    slo_ttft_s: float = field(default=2.0, metadata={"help": "goodput SLO on TTFT, seconds"})
    slo_tpot_s: float = field(default=0.5, metadata={"help": "goodput SLO on TPOT, seconds"})
    target_rer: float = field(default=0.20, metadata={
        "help": "RER the rollout stage (rrr) aims at.", "min": 0, "min_open": True})
    process_spread: float = field(default=0.02, metadata={
        "help": "Prior SD of one engine process's log speed factor (between-process "
                "variance) added to the intervals of RER and the latency ratios; 0: the "
                "per-request bootstrap alone.", "min": 0})
    process_key: str = field(default=CANDIDATE, metadata={
        "help": "The name the candidate's process effect is drawn under: each candidate of "
                "a run its own name, so two candidates never share one process draw."})
    # where estimate() leaves each figure's resamples (figure, arm, scenario) -> array,
    # for comparing candidates on the same resamples; not a setting, never recorded
    keep_resamples: dict | None = field(default=None, compare=False, repr=False,
                                        metadata={"help": "internal", "record": False})
    text_sample: int = field(
        default=2000,
        metadata={"help": "BLEU / chrF on at most this many pairs (seeded, stratified sample)"})
    tokenizer: str | None = field(default=None, metadata={
        "help": "A tokenizer.json (or a directory holding one, or a model name in the Hugging "
                "Face cache) to count first_divergence in tokens when the arms return no "
                "token ids. Default: the one the run was replayed with (its --tokenizer); "
                "else whitespace words."})

    def __post_init__(self) -> None:
        if self.n_resamples < 1:
            raise ValueError(f"n_resamples must be >= 1, got {self.n_resamples}")
        if not 0.5 <= self.confidence < 1:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence}")
        if self.min_samples < 1 or self.min_determinism_prompts < 1:
            raise ValueError("min_samples and min_determinism_prompts must be >= 1")
        if self.termination_tolerance < 0:
            raise ValueError(f"termination_tolerance must be >= 0, got "
                             f"{self.termination_tolerance}")
        if self.target_rer <= 0:
            raise ValueError(f"target_rer must be > 0, got {self.target_rer}")
        if not 0 <= self.process_spread < 1:
            raise ValueError(f"process_spread must be in [0, 1), got {self.process_spread}")
        if self.text_sample < 1:
            raise ValueError(f"text_sample must be >= 1, got {self.text_sample}")

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.metadata.get("record", True)}
