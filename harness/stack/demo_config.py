"""What `layergate demo` runs: one config object, recorded in the run, and the engine
settings of each candidate the demo can evaluate."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from exporters.catalogue import BASELINE, BASELINE2, CANDIDATE
from harness.stack.engines import FULL_DEPTH, EngineSpec


@dataclass(frozen=True)
class DemoCandidate:
    """A candidate engine and the baselines it runs beside: the candidate's skip policy and
    the engine switches each side gets."""

    skip_policy: str
    description: str
    switches: tuple[str, ...] = ()
    baseline_switches: tuple[str, ...] = ()


CANDIDATES = {
    "dynamic": DemoCandidate("dynamic", "dynamic layer skipping with the bundled calibrated "
                                        "rules"),
    "speculative": DemoCandidate("speculative", "self-speculative decoding (lossless: draft "
                                                "shallow, verify full)"),
    "static": DemoCandidate("static", "static layer pruning with the bundled calibrated skip "
                                      "set"),
    # the engine's own redundancy switches: lossless, only the cost changes
    "engine-switches": DemoCandidate(
        FULL_DEPTH, "prefix cache on + bucketed padding vs a baseline with both off",
        ("--prefix-cache", "on", "--padding", "bucketed"),
        ("--prefix-cache", "off", "--padding", "max")),
}
# preset of `--quick`: a first look in a couple of minutes, and the test suite's demo
QUICK = {"requests": 8, "max_tokens": 16, "rate": 1.0, "determinism_prompts": 3, "repeats": 2}


@dataclass(frozen=True)
class DemoConfig:
    out: Path = field(default=Path("runs"), metadata={
        "help": "Parent of the run directory runs/<id>/."})
    candidate: str = field(default="dynamic", metadata={
        "help": "The candidate: dynamic skipping (bundled calibrated rules), self-speculative "
                "decoding, static pruning, or engine-switches (prefix cache on + bucketed "
                "padding against baselines with both off).", "choices": tuple(CANDIDATES)})
    scenario: str = field(default="saas-mix", metadata={
        "help": "Bundled traffic mix to replay (scenarios/mixes)."})
    # sized for three 1-thread engines sharing 2 cores: the offered load stays under their
    # capacity, so the run measures the candidate rather than a queue
    requests: int | None = field(default=48, metadata={
        "help": "Requests to replay.", "min": 1})
    max_tokens: int | None = field(default=32, metadata={
        "help": "Cap on each request's max_tokens.", "min": 1})
    rate: float | None = field(default=0.25, metadata={
        "help": "Poisson arrivals per second, which three 1-thread engines on 2 cores keep "
                "up with.", "min": 0, "min_open": True})
    timeout_s: float = field(default=300.0, metadata={"help": "Per-request replay timeout."})
    determinism_prompts: int = field(default=6, metadata={"help": "Repeat-suite sample."})
    repeats: int = field(default=3, metadata={
        "help": "Repeats per prompt in the determinism suite.", "min": 2})
    threads: int = field(default=1, metadata={
        "help": "torch threads per engine; three engines share the cores, so keep "
                "3 x threads <= cores.", "min": 1})
    gate_policy: Path | None = field(default=None, metadata={
        "help": "Gate policy: a bundled name or a YAML file [default: default]."})
    hold: bool = field(default=False, metadata={
        "help": "Keep engines and Prometheus up after the verdict, until Ctrl-C."})

    def __post_init__(self) -> None:
        if self.candidate not in CANDIDATES:
            raise ValueError(f"unknown candidate {self.candidate!r}: choose one of "
                             f"{', '.join(CANDIDATES)}")
        for name in ("requests", "max_tokens", "determinism_prompts", "repeats", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"rate must be > 0, got {self.rate}")

    @classmethod
    def quick(cls, out: Path, **overrides: Any) -> DemoConfig:
        """A much smaller run (QUICK), `overrides` on top."""
        return cls(out=out, **{**QUICK, **overrides})

    @property
    def description(self) -> str:
        return CANDIDATES[self.candidate].description

    def engines(self) -> tuple[EngineSpec, ...]:
        chosen = CANDIDATES[self.candidate]

        def spec(arm: str, skip_policy: str, switches: tuple[str, ...]) -> EngineSpec:
            return EngineSpec(arm, skip_policy=skip_policy, extra_args=switches,
                              threads=self.threads)

        return (spec(BASELINE, FULL_DEPTH, chosen.baseline_switches),
                spec(BASELINE2, FULL_DEPTH, chosen.baseline_switches),
                spec(CANDIDATE, chosen.skip_policy, chosen.switches))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["out"] = str(self.out)
        out["gate_policy"] = None if self.gate_policy is None else str(self.gate_policy)
        return out
