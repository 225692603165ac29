"""What the work queue hands out and takes back (`queue.py` owns the tables): plain data,
which a Locust worker, holding no store, reads and writes as JSON over the master's
messages, so importing it costs a worker none of SQLite's or the store's modules."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import from_json, to_json
from layergate.exporters.traffic import TrafficRecord, parse_record


@dataclass(frozen=True)
class QueueEntry:
    """What `fill` takes: a record, the arms it still needs, its offset from the start."""

    record: TrafficRecord
    arms: tuple[str, ...]
    offset_s: float
    # own mode: the conversation's turns (`record` the first) and how much longer than one
    # request its lease must run
    turns: tuple[TrafficRecord, ...] = ()
    span_s: float = 0.0


@dataclass(frozen=True)
class ArmState:
    """Where one arm stands in a conversation: its answers to the turns before `start`
    (what its history is built from), the simulator's answers to its calls by turn, and
    `start`, the turn to send next (len(turns): nothing left)."""

    answers: tuple[ArmResult, ...]
    tools: dict[int, tuple[str, ...]]
    start: int

    def to_json(self) -> dict[str, Any]:
        return {"answers": [{"text": a.output_text, "calls": to_json(a.tool_calls),
                             "reasoning": a.reasoning_text, "refusal": a.refusal,
                             "request_id": a.request_id} for a in self.answers],
                "tools": {str(k): list(v) for k, v in self.tools.items()},
                "start": self.start}

    @classmethod
    def from_json(cls, obj: dict[str, Any], arm: str) -> ArmState:
        answers = tuple(ArmResult(a["request_id"], arm, "", ok=True, output_text=a["text"],
                                  tool_calls=from_json(a["calls"]),
                                  reasoning_text=a["reasoning"], refusal=a["refusal"])
                        for a in obj["answers"])
        return cls(answers, {int(k): tuple(v) for k, v in obj["tools"].items()},
                   int(obj["start"]))


@dataclass(frozen=True)
class TurnDone:
    """Own mode, one arm at one turn (`request_id`): its `result`, or that its conversation
    `ended` after this turn (the reason), or the simulator's answers to its calls
    (`tool_answers`: the calls as JSON, the answers)."""

    request_id: str
    arm: str
    result: ArmResult | None = None
    intended_at: float | None = None
    ended: str | None = None
    tool_answers: tuple[list[Any], list[str]] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "arm": self.arm, "intended_at": self.intended_at,
                "ended": self.ended, "tool_answers": self.tool_answers}


@dataclass(frozen=True)
class WorkItem:
    """A claimed record. `due_at` is the wall-clock time (`time.time()`) it is meant to be
    sent: `t0 + offset_s` on its first claim, the claim time when it is sent again."""

    seq: int
    record: TrafficRecord
    arms: tuple[str, ...]
    due_at: float
    attempt: int  # 1, or more when an earlier lease ran out
    # own mode: the conversation's turns and each arm's state in it (empty otherwise)
    turns: tuple[TrafficRecord, ...] = ()
    states: dict[str, ArmState] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, e.g. for a message to a worker that has no run directory."""
        out = {"seq": self.seq, "record": self.record.to_json(), "arms": list(self.arms),
               "due_at": self.due_at, "attempt": self.attempt}
        if self.turns:
            out["turns"] = [t.to_json() for t in self.turns]
            out["states"] = {arm: s.to_json() for arm, s in self.states.items()}
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> WorkItem:
        record = parse_record(obj["record"], Path("work item"), obj["seq"])
        turns = tuple(parse_record(t, Path("work item"), obj["seq"])
                      for t in obj.get("turns") or ())
        states = {arm: ArmState.from_json(s, arm) for arm, s in (obj.get("states") or {}).items()}
        return cls(obj["seq"], record, tuple(obj["arms"]), obj["due_at"], obj["attempt"],
                   turns, states)


@dataclass(frozen=True)
class Completion:
    """The results of one claimed row, as `complete_many` takes them."""

    seq: int
    request_id: str
    results: tuple[ArmResult, ...]
    intended_at: float | None  # wall clock (the queue's) it was meant to be sent


@dataclass(frozen=True)
class QueueProgress:
    total: int  # rows in the queue
    done: int  # completed
    leased: int  # claimed, not yet completed
    resent: int  # claims beyond the first (leases that ran out)
