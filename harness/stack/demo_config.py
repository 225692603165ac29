"""What `layergate demo` runs: one config object, recorded in the run, and the engine
settings of each candidate the demo can evaluate."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.stack.engines import EngineSpec

# candidate name -> (candidate serve args, baseline serve args, what it shows)
CANDIDATES: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "dynamic": (("--policy", "dynamic"), ("--policy", "full"),
                "dynamic layer skipping with the bundled calibrated rules"),
    "speculative": (("--policy", "speculative"), ("--policy", "full"),
                    "self-speculative decoding (lossless: draft shallow, verify full)"),
    "static": (("--policy", "static"), ("--policy", "full"),
               "static layer pruning with the bundled calibrated skip set"),
    # the engine's own redundancy switches: lossless, only the cost changes
    "engine-switches": (("--policy", "full", "--prefix-cache", "on", "--padding", "bucketed"),
                        ("--policy", "full", "--prefix-cache", "off", "--padding", "max"),
                        "prefix cache on + bucketed padding vs a baseline with both off"),
}


@dataclass(frozen=True)
class DemoConfig:
    out: Path = field(metadata={"help": "parent directory of the run directory"})
    candidate_policy: str = field(default="dynamic", metadata={"help": "the candidate"})
    scenario: str = field(default="saas-mix", metadata={"help": "bundled traffic mix"})
    # sized for three 1-thread engines sharing 2 cores: the offered load stays under their
    # capacity, so the run measures the candidate rather than a queue
    requests: int | None = field(default=48,
                                 metadata={"help": "requests to replay (None: the mix's)"})
    max_tokens: int | None = field(default=32,
                                   metadata={"help": "cap on each request's max_tokens"})
    rate: float | None = field(default=0.25,
                               metadata={"help": "Poisson rate (None: the mix's arrivals)"})
    timeout_s: float = field(default=300.0, metadata={"help": "per-request replay timeout"})
    determinism_prompts: int = field(default=6, metadata={"help": "repeat-suite sample"})
    repeats: int = field(default=3, metadata={"help": "repeats per prompt"})
    threads: int = field(default=1, metadata={"help": "torch threads per engine"})
    gate_policy: Path | None = field(default=None, metadata={"help": "gate policy YAML"})
    hold: bool = field(default=False, metadata={"help": "keep the stack up until Ctrl-C"})

    def __post_init__(self) -> None:
        if self.candidate_policy not in CANDIDATES:
            raise ValueError(f"unknown candidate policy {self.candidate_policy!r}: choose one "
                             f"of {', '.join(CANDIDATES)}")
        for name in ("requests", "max_tokens", "determinism_prompts", "repeats", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"rate must be > 0, got {self.rate}")

    @classmethod
    def quick(cls, out: Path, **overrides: Any) -> DemoConfig:
        """A much smaller run: the test's, and a first look in about two minutes."""
        small = {"requests": 8, "max_tokens": 16, "rate": 1.0, "determinism_prompts": 3,
                 "repeats": 2}
        return cls(out=out, **{**small, **overrides})

    @property
    def description(self) -> str:
        return CANDIDATES[self.candidate_policy][2]

    def engines(self) -> tuple[EngineSpec, ...]:
        candidate_args, baseline_args, _ = CANDIDATES[self.candidate_policy]

        def spec(arm: str, args: tuple[str, ...]) -> EngineSpec:
            policy = args[args.index("--policy") + 1]
            rest = tuple(a for i, a in enumerate(args)
                         if i not in (args.index("--policy"), args.index("--policy") + 1))
            return EngineSpec(arm, policy=policy, extra_args=rest, threads=self.threads)

        return (spec("baseline", baseline_args), spec("baseline2", baseline_args),
                spec("candidate", candidate_args))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["out"] = str(self.out)
        out["gate_policy"] = None if self.gate_policy is None else str(self.gate_policy)
        return out
