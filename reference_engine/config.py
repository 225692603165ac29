"""EngineConfig: the one config object of a reference engine, passed down and recorded whole."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_MODEL = "smollm2-135m"
DTYPES = ("fp32", "bf16")
DEVICES = ("auto", "cpu", "cuda")
PADDINGS = ("bucketed", "max")
PREFIX_CACHE_MODES = ("on", "off")
DEFAULT_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048)


@dataclass(frozen=True)
class EngineConfig:
    """Everything that decides what the engine computes and how; `to_dict()` records it."""

    model: str = field(default=DEFAULT_MODEL, metadata={
        "help": "`smollm2-135m` (the bundled GGUF) or a local Hugging Face Llama-family dir"})
    dtype: str = field(default="fp32", metadata={"help": "fp32 | bf16"})
    device: str = field(default="auto", metadata={"help": "auto | cpu | cuda"})
    threads: int = field(default=0, metadata={"help": "torch intra-op threads; 0 = default"})
    seed: int = field(default=0, metadata={"help": "global seed, pinned at load"})
    policy: str = field(default="full", metadata={"help": "registered layer policy name"})
    rules: str | None = field(default=None, metadata={"help": "rules file for `dynamic`"})
    skip_layers: tuple[int, ...] = field(default=(), metadata={
        "help": "layer indices for `static`"})
    dry_run: bool = field(default=False, metadata={
        "help": "decide and report, but execute every layer"})
    policy_options: tuple[tuple[str, Any], ...] = field(default=(), metadata={
        "help": "extra (key, value) options for the policy"})
    batch_invariant: bool = field(default=False, metadata={
        "help": "a request's output never depends on what else is in the batch"})
    padding: str = field(default="bucketed", metadata={"help": "bucketed | max"})
    prefix_cache: str = field(default="on", metadata={"help": "on | off"})
    prefix_cache_block: int = field(default=16, metadata={"help": "tokens per cached block"})
    prefix_cache_bytes: int = field(default=256 * 1024 * 1024, metadata={
        "help": "byte budget of the prefix cache (LRU eviction past it)"})
    max_batch_size: int = field(default=8, metadata={"help": "running sequences at most"})
    max_queue: int = field(default=64, metadata={"help": "waiting requests at most"})
    max_model_len: int | None = field(default=None, metadata={
        "help": "context length; None = min(2048, the model's)"})
    buckets: tuple[int, ...] = field(default=DEFAULT_BUCKETS, metadata={
        "help": "prompt-length bucket boundaries for bucketed padding"})

    def __post_init__(self) -> None:
        _one_of("dtype", self.dtype, DTYPES)
        _one_of("device", self.device, DEVICES)
        _one_of("padding", self.padding, PADDINGS)
        _one_of("prefix_cache", self.prefix_cache, PREFIX_CACHE_MODES)
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
    def options(self) -> dict[str, Any]:
        return dict(self.policy_options)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["skip_layers"] = list(self.skip_layers)
        d["buckets"] = list(self.buckets)
        d["policy_options"] = dict(self.policy_options)
        return d


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"EngineConfig.{name} must be one of {'|'.join(allowed)}, got {value!r}")
