"""What a replay's stop hook answers (`run_replay(config, should_stop)`): the arms whose
question is answered, so sending to them stops while the others go on, and the reason to
stop sending altogether. The gate's sequential predicate
(`layergate.harness.gate.sequential.until_decided`) answers with it; the replay acts on it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Stop:
    # arm -> why it is sent nothing more (e.g. a candidate whose verdict is decided)
    arms: dict[str, str] = field(default_factory=dict)
    # why the run sends nothing more at all (None: the arms not in `arms` go on)
    run: str | None = None

    def __bool__(self) -> bool:
        return bool(self.arms) or self.run is not None

    @classmethod
    def of(cls, answer: bool | str | Stop | None) -> Stop:
        """A stop hook's answer as a Stop: falsy goes on, True or a reason stops the run."""
        if isinstance(answer, Stop):
            return answer
        if not answer:
            return cls()
        return cls(run=answer if isinstance(answer, str) else "should_stop answered True")
