"""A sweep directory: `capacity.json` (the config, every finished step with its judged
arms, the status), rewritten atomically after each step so a crash loses at most the step
in flight, and `steps/NNN/`, each step's replay run directory. Beside `rundir.py`: the
sweep writes it, the gate and the HTML report read it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters.atomic import write_json_atomic
from layergate.exporters.catalogue import RUNNING, RunStatus
from layergate.exporters.errors import InfrastructureError
from layergate.exporters.figures.capacity_step import StepArm
from layergate.harness.manifest import now_iso

STATE = "capacity.json"
REPORT = "capacity-report.json"
KIND = "capacity"


class StateError(InfrastructureError, RuntimeError):
    """A sweep directory whose state is missing or cannot be read."""


@dataclass(frozen=True)
class Step:
    index: int
    load: float
    arms: tuple[str, ...]
    requests: int  # records sent to each arm, warm-up included
    seconds: float  # wall time of the step
    results: tuple[StepArm, ...]
    idle_wait_s: float | None = None  # the idle check before it (None: none was made)
    busy: tuple[str, ...] = ()  # arms not idle when the check gave up

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "load": self.load, "arms": list(self.arms),
                "requests": self.requests, "seconds": self.seconds,
                "results": [r.to_json() for r in self.results],
                "idle_wait_s": self.idle_wait_s, "busy": list(self.busy)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Step:
        return cls(int(d["index"]), float(d["load"]), tuple(d["arms"]), int(d["requests"]),
                   float(d["seconds"]), tuple(StepArm.from_json(r) for r in d["results"]),
                   d.get("idle_wait_s"), tuple(d.get("busy", ())))


@dataclass
class SweepState:
    config: dict[str, Any]
    status: RunStatus = RUNNING
    created: str = field(default_factory=now_iso)
    steps: list[Step] = field(default_factory=list)
    done: dict[str, str] = field(default_factory=dict)  # arm -> why its ladder ended
    notes: list[str] = field(default_factory=list)
    resumes: list[dict[str, Any]] = field(default_factory=list)
    # each arm's idle probe time (harness/capacity/idle.py), learnt before the first step and
    # kept so that a resume, whose arms may still work off the killed step, does not relearn
    idle_s: dict[str, float] = field(default_factory=dict)

    def arm_steps(self) -> list[StepArm]:
        return [r for s in self.steps for r in s.results]

    @property
    def sent(self) -> int:
        """Requests sent so far, every arm's."""
        return sum(s.requests * len(s.arms) for s in self.steps)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["steps"] = [s.to_json() for s in self.steps]
        return {"kind": KIND, **out}


class SweepDir:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def state_path(self) -> Path:
        return self.path / STATE

    @property
    def report_path(self) -> Path:
        return self.path / REPORT

    def exists(self) -> bool:
        return self.state_path.is_file()

    def step_dir(self, index: int) -> Path:
        return self.path / "steps" / f"{index:03d}"

    def step_traffic(self, index: int) -> Path:
        return self.path / "steps" / f"{index:03d}.traffic.jsonl"

    def read(self) -> SweepState:
        try:
            d = json.loads(self.state_path.read_text(encoding="utf-8"))
            if d.get("kind") != KIND:
                raise StateError(f"{self.state_path}: not a capacity sweep")
            return SweepState(d["config"], d["status"], d["created"],
                              [Step.from_json(s) for s in d["steps"]], dict(d["done"]),
                              list(d["notes"]), list(d.get("resumes", [])),
                              {k: float(v) for k, v in d.get("idle_s", {}).items()})
        except FileNotFoundError as exc:
            raise StateError(f"{self.path}: not a capacity sweep (no {STATE})") from exc
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StateError(f"{self.state_path}: unreadable: {exc}") from exc

    def write(self, state: SweepState) -> None:
        self.write_json(self.state_path, state.to_json())

    def write_json(self, path: Path, obj: Any) -> None:
        """Atomically: a crash leaves the old file or the new one."""
        write_json_atomic(path, obj, default=float)


def is_sweep(path: str | Path) -> bool:
    return SweepDir(path).exists()
