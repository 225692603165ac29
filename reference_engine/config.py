"""EngineConfig: the one config object of a reference engine, passed down and recorded whole."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from layergate.exporters.catalogue import FULL_DEPTH
from layergate.exporters.model_files import DEFAULT_MODEL
from layergate.reference_engine.skip_policies.registry import skip_policy_names

DTYPES = ("fp32", "bf16")
DEVICES = ("auto", "cpu", "cuda")
PADDINGS = ("bucketed", "max")
PREFIX_CACHE_MODES = ("on", "off")
REASONING_PARSERS = ("granite",)  # reference_engine/server/reasoning.py
DEFAULT_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class EngineConfig:
    """Everything that decides what the engine computes and how; `to_dict()` records it."""

    model: str = field(default=DEFAULT_MODEL, metadata={
        "help": f"`{DEFAULT_MODEL}` (the bundled GGUF) or a local Hugging Face Llama-family "
                "directory."})
    dtype: str = field(default="fp32", metadata={"help": "Weights and activations dtype.",
                                                 "choices": DTYPES})
    device: str = field(default="auto", metadata={"help": "Where the model runs.",
                                                  "choices": DEVICES})
    threads: int = field(default=0, metadata={
        "help": "torch threads; 0 = torch's default. Recorded with the numerics.", "min": 0})
    seed: int = field(default=0, metadata={"help": "Global seed, pinned."})
    skip_policy: str = field(default=FULL_DEPTH, metadata={
        "help": "Which layers run: full depth, a static pruned set, dynamic skipping by "
                "rules, or self-speculative decoding.", "choices": skip_policy_names})
    rules: str | None = field(default=None, metadata={
        "help": "Rules file written by `layergate calibrate` for static, dynamic and "
                "speculative (default: the bundled calibrated one of the model)."})
    skip_layers: tuple[int, ...] = field(default=(), metadata={
        "help": "Decoder layers to skip under `static` (or the draft's under `speculative`), "
                "e.g. 3,4; default: from the rules file."})
    dry_run: bool = field(default=False, metadata={
        "help": "Decide and report what the skip policy would skip, but run every layer."})
    skip_policy_options: tuple[tuple[str, Any], ...] = field(default=(), metadata={
        "help": "Skip-policy setting over the rules file, repeatable; `speculative`: gamma=N "
                "(drafted tokens per step), exit_after=E (draft exits after layer E), "
                "head_tokens=N (draft LM head cut to the first N ids)."})
    batch_invariant: bool = field(default=False, metadata={
        "help": "A request's output never depends on what else is in the batch."})
    padding: str = field(default="bucketed", metadata={
        "help": "Pad within prompt-length buckets, or every batch to its longest sequence.",
        "choices": PADDINGS})
    prefix_cache: str = field(default="on", metadata={
        "help": "Reuse KV of shared prompt prefixes.", "choices": PREFIX_CACHE_MODES})
    prefix_cache_block: int = field(default=16, metadata={"help": "Tokens per cached block.",
                                                          "min": 1})
    prefix_cache_bytes: int = field(default=256 * 1024 * 1024, metadata={
        "help": "Byte budget of the prefix cache (LRU eviction past it)."})
    max_batch_size: int = field(default=8, metadata={
        "help": "Sequences decoded together at most.", "min": 1})
    max_queue: int = field(default=64, metadata={
        "help": "Waiting requests at most; past it the server answers 429 + Retry-After.",
        "min": 1})
    max_model_len: int | None = field(default=None, metadata={
        "help": "Context length (prompt + completion); default min(2048, the model's).",
        "min": 2})
    buckets: tuple[int, ...] = field(default=DEFAULT_BUCKETS, metadata={
        "help": "prompt-length bucket boundaries for bucketed padding"})
    reasoning_parser: str | None = field(default=None, metadata={
        "help": "Split every chat answer into reasoning and content by these markers, as "
                "vLLM's flag of the name: `granite` reads \"Here's my thought process:\" ... "
                "\"Here's my response:\" (or \"Here is\"); the reasoning is sent as "
                "`message.reasoning` / `delta.reasoning`. Without it a request turns the split "
                "on with chat_template_kwargs {\"thinking\": true}. Tool calls (pythonic, "
                "`[f(x=1)]`) are parsed whenever a request has `tools`.",
        "choices": REASONING_PARSERS})

    def __post_init__(self) -> None:
        _one_of("dtype", self.dtype, DTYPES)
        _one_of("device", self.device, DEVICES)
        _one_of("padding", self.padding, PADDINGS)
        _one_of("prefix_cache", self.prefix_cache, PREFIX_CACHE_MODES)
        if self.reasoning_parser is not None:
            _one_of("reasoning_parser", self.reasoning_parser, REASONING_PARSERS)
        for name in ("max_batch_size", "max_queue", "prefix_cache_block"):
            if getattr(self, name) < 1:
                raise ValueError(f"EngineConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.threads < 0:
            raise ValueError(f"EngineConfig.threads must be >= 0, got {self.threads}")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError(f"EngineConfig.max_model_len must be >= 2, got {self.max_model_len}")
        if list(self.buckets) != sorted(set(self.buckets)) or not self.buckets:
            raise ValueError(f"EngineConfig.buckets must be strictly increasing, "
                             f"got {self.buckets}")

    @property
    def skip_policy_settings(self) -> dict[str, Any]:
        return dict(self.skip_policy_options)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["skip_layers"] = list(self.skip_layers)
        d["buckets"] = list(self.buckets)
        d["skip_policy_options"] = dict(self.skip_policy_options)
        return d


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"EngineConfig.{name} must be one of {'|'.join(allowed)}, got {value!r}")
