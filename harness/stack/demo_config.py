"""What `layergate demo` runs: one config object, recorded in the run, and the engine
settings of each candidate the demo can evaluate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters import bundled
from layergate.exporters.catalogue import BASELINE, BASELINE2, CANDIDATE, FULL_DEPTH
from layergate.exporters.errors import UsageError
from layergate.exporters.model_files import DEFAULT_MODEL
from layergate.harness.gate import POLICY_HELP
from layergate.harness.stack.engines import EngineSpec


@dataclass(frozen=True)
class DemoCandidate:
    """A candidate engine and the baselines it runs beside: the candidate's skip policy and
    the engine switches each side gets."""

    skip_policy: str
    description: str
    switches: Callable[[], tuple[str, ...]] = tuple  # read when the engines are started
    baseline_switches: tuple[str, ...] = ()


# the static candidate of the demo: the 12 least influential layers of the bundled
# calibration's ranking (its calibrated set is empty: even one layer breaks exact match)
STATIC_SKIPPED = 12
# the dynamic candidate's rules, calibrated at a looser quality target than the bundled
# default (which skips nothing on this model): exact match >= 0.5 on the calibration prompts
LOOSE_RULES = "smollm2-135m-em50"


def _static_layers() -> tuple[str, ...]:
    ranking = bundled.read_rules(bundled.rules_file(DEFAULT_MODEL))["static"]["ranking"]
    return ("--skip-layers", ",".join(str(i) for i in sorted(ranking[:STATIC_SKIPPED])))


def rules_of(candidate: str) -> Path | None:
    """The rules file a demo candidate serves with (calibration's notes are read from it);
    None when it serves with none (static prunes a fixed set)."""
    calibrated = {"dynamic": LOOSE_RULES, "speculative": DEFAULT_MODEL}.get(candidate)
    return None if calibrated is None else bundled.rules_file(calibrated)


def _loose_rules() -> tuple[str, ...]:
    return ("--rules", str(bundled.rules_file(LOOSE_RULES)))


CANDIDATES = {
    "dynamic": DemoCandidate("dynamic", "dynamic layer skipping with rules calibrated to keep "
                                        "exact match >= 0.5", _loose_rules),
    "speculative": DemoCandidate("speculative", "self-speculative decoding (lossless: draft "
                                                "shallow, verify full)"),
    "static": DemoCandidate("static", f"static pruning of the {STATIC_SKIPPED} least "
                                      "influential layers", _static_layers),
    # the engine's own redundancy switches: lossless, only the cost changes
    "engine-switches": DemoCandidate(
        FULL_DEPTH, "prefix cache on + bucketed padding vs a baseline with both off",
        lambda: ("--prefix-cache", "on", "--padding", "bucketed"),
        ("--prefix-cache", "off", "--padding", "max")),
}
# the candidates `make demo` judges side by side: one that breaks outputs, one lossless, and
# the calibrated dynamic one
DEFAULT_CANDIDATES = ("static", "speculative", "dynamic")
# preset of `--quick`: a first look in a couple of minutes, and the test suite's demo
QUICK = {"requests": 8, "max_tokens": 16, "rate": 1.0, "determinism_prompts": 3, "repeats": 2}


class DemoConfigError(UsageError, ValueError):
    """A demo configuration that cannot run."""


@dataclass(frozen=True)
class DemoConfig:
    out: Path = field(default=Path("runs"), metadata={
        "help": "Parent of the run directory runs/<id>/."})
    candidates: tuple[str, ...] = field(default=DEFAULT_CANDIDATES, metadata={
        "help": "A candidate, repeatable (all are judged against the same baselines in one "
                "replay): static (12 layers pruned), speculative (self-speculative decoding), "
                "dynamic (skipping with rules calibrated at exact match >= 0.5), or "
                "engine-switches (prefix cache on + bucketed padding against baselines with "
                "both off; alone only).", "choices": tuple(CANDIDATES)})
    scenario: str = field(default="saas-qa", metadata={
        "help": "Bundled traffic mix to replay (scenarios/mixes)."})
    # sized for five 1-thread engines sharing 2 cores: the offered load stays under their
    # capacity, so the run measures the candidates rather than a queue
    requests: int | None = field(default=40, metadata={
        "help": "Requests to replay.", "min": 1})
    max_tokens: int | None = field(default=24, metadata={
        "help": "Cap on each request's max_tokens.", "min": 1})
    rate: float | None = field(default=0.2, metadata={
        "help": "Poisson arrivals per second, which five 1-thread engines on 2 cores keep "
                "up with.", "min": 0, "min_open": True})
    timeout_s: float = field(default=300.0, metadata={"help": "Per-request replay timeout."})
    determinism_prompts: int = field(default=6, metadata={"help": "Repeat-suite sample."})
    repeats: int = field(default=3, metadata={
        "help": "Repeats per prompt in the determinism suite.", "min": 2})
    threads: int = field(default=1, metadata={
        "help": "torch threads per engine; the engines (2 + one per candidate) share the "
                "cores, so keep their threads together near the cores.", "min": 1})
    gate_policy: Path | None = field(default=None, metadata={"help": POLICY_HELP})
    hold: bool = field(default=False, metadata={
        "help": "Keep engines and Prometheus up after the verdict, until Ctrl-C."})

    def __post_init__(self) -> None:
        for name in self.candidates:
            if name not in CANDIDATES:
                raise DemoConfigError(f"candidates: unknown candidate {name!r}, choose from "
                                      f"{', '.join(CANDIDATES)}")
        if not self.candidates or len(set(self.candidates)) != len(self.candidates):
            raise DemoConfigError("give each candidate once (and at least one)")
        baselines = {CANDIDATES[n].baseline_switches for n in self.candidates}
        if len(baselines) > 1:
            raise DemoConfigError("engine-switches runs alone: its baselines run with other "
                                  "switches than the other candidates'")
        for name in ("requests", "max_tokens", "determinism_prompts", "repeats", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise DemoConfigError(f"{name} must be >= 1, got {value}")
        if self.rate is not None and self.rate <= 0:
            raise DemoConfigError(f"rate must be > 0, got {self.rate}")

    @classmethod
    def quick(cls, out: Path, **overrides: Any) -> DemoConfig:
        """A much smaller run (QUICK), `overrides` on top."""
        return cls(out=out, **{**QUICK, **overrides})

    @property
    def description(self) -> str:
        return "; ".join(f"{n}: {CANDIDATES[n].description}" for n in self.candidates)

    def arm(self, name: str) -> str:
        """The arm a candidate runs as: `candidate` when it is the only one, else its name."""
        return CANDIDATE if len(self.candidates) == 1 else name

    def engines(self) -> tuple[EngineSpec, ...]:
        baselines = CANDIDATES[self.candidates[0]].baseline_switches

        def spec(arm: str, skip_policy: str, switches: tuple[str, ...]) -> EngineSpec:
            return EngineSpec(arm, skip_policy=skip_policy, extra_args=switches,
                              threads=self.threads)

        return (spec(BASELINE, FULL_DEPTH, baselines), spec(BASELINE2, FULL_DEPTH, baselines),
                *(spec(self.arm(n), CANDIDATES[n].skip_policy, CANDIDATES[n].switches())
                  for n in self.candidates))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["out"] = str(self.out)
        out["candidates"] = list(self.candidates)
        out["gate_policy"] = None if self.gate_policy is None else str(self.gate_policy)
        return out
