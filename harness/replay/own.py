"""`own` conversation mode: each arm's turn n + 1 is built from that arm's own answers to
turns 1..n, not from the recorded ones (docs/FORMATS.md, "Conversation modes").

A conversation's turns are the chat records that open with the same first message
(`exporters/figures/conversations.py`), in the order of their histories' lengths. Turn n + 1
of the traffic holds turn n's messages, the recorded reply, then what came after it: a user
message, or the tool results the recorded calls got. In `own` mode an arm's turn n + 1 is its
own history, its own reply to turn n (content, tool calls and, where the server wants it
back, reasoning), then what came after the recorded reply:

- a user message (or anything but tool results) follows as recorded;
- tool results follow when the arm's calls equal the recorded ones (names and arguments as
  JSON, in order), each sent with the `tool_call_id` of the arm's own call;
- else (the arm called other tools, or none where the recording called some, or some
  where it called none) the arm's conversation ends there, diverged, unless a tool
  simulator answers the arm's own calls (`--tool-simulator`; its answers are stored in the
  run, so a resume sends the same). A recording that called tools the arm did not call
  has results no call asked for: that ends the conversation whatever the simulator.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layergate.exporters.catalogue import RECORDED
from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import ToolCall, agree, from_message
from layergate.exporters.traffic import CHAT, TrafficRecord

OWN = "own"  # the other mode, `recorded`, is named as the recorded responses are
CONVERSATION_MODES = (RECORDED, OWN)
# how an arm's own reasoning goes back in its history: left out (OpenAI's and DeepSeek's
# rule for chat history), or in the field the server streamed it in
REASONING_BACK = ("omit", "reasoning_content", "reasoning")
SIMULATOR_TIMEOUT_S = 30.0


def conversations(records: Sequence[TrafficRecord]) -> list[tuple[TrafficRecord, ...]]:
    """The records as conversations, each its turns in order, in the order of their first
    turns' offsets; a record in no multi-turn conversation is one of a single turn."""
    # the planner's: a Locust worker, which imports this module, never groups records
    from layergate.exporters.figures.conversations import opening, ordered_turns

    positions = {}
    for r in records:
        if r.endpoint == CHAT:
            key, _ = opening(list(r.body.get("messages") or []))
            if key is not None:
                positions[r.id] = (f"{r.scenario}\0{key}", len(r.body["messages"]))
    turns = ordered_turns(positions)
    by_key: dict[str, list[tuple[int, TrafficRecord]]] = {}
    singles: list[tuple[TrafficRecord, ...]] = []
    for r in records:
        if r.id in turns:
            key, turn = turns[r.id]
            by_key.setdefault(key, []).append((turn, r))
        else:
            singles.append((r,))
    grouped = [tuple(r for _, r in sorted(turns_)) for turns_ in by_key.values()]
    return sorted([*grouped, *singles], key=lambda c: (c[0].offset_s, c[0].id))


@dataclass(frozen=True)
class Ended:
    """An arm's conversation ends after `turn` (0-based): its next turn cannot be built."""

    turn: int
    reason: str


@dataclass(frozen=True)
class NeedsTools:
    """Turn `turn`'s own calls differ from the recorded ones: the simulator must answer
    them before the next turn can be built."""

    turn: int
    calls: tuple[ToolCall, ...]


def assistant_message(result: ArmResult, reasoning: str = "omit") -> dict[str, Any]:
    """An arm's answer as the assistant message it goes back as in its own history."""
    message: dict[str, Any] = {"role": "assistant",
                               "content": result.output_text if result.output_text
                               or not result.tool_calls else None}
    if result.tool_calls:
        message["tool_calls"] = [call.to_wire() for call in result.tool_calls]
    if result.refusal:
        message["refusal"] = result.refusal
    if reasoning != "omit" and result.reasoning_text:
        message[reasoning] = result.reasoning_text
    return message


def own_messages(turns: Sequence[TrafficRecord], turn: int, answers: Sequence[ArmResult],
                 tool_answers: Mapping[int, Sequence[str]], reasoning: str = "omit",
                 simulate: bool = False) -> list[dict[str, Any]] | Ended | NeedsTools:
    """The messages of an arm's turn `turn` (0-based), from its `answers` to the turns
    before it and the simulator's answers to its calls (turn -> one per call, in order)."""
    messages = [dict(m) for m in turns[0].body["messages"]]
    for j in range(turn):
        before, after = turns[j].body["messages"], turns[j + 1].body["messages"]
        recorded = after[len(before)] if len(after) > len(before) else {}
        follow = [dict(m) for m in after[len(before) + 1:]]
        own = answers[j]
        messages.append(assistant_message(own, reasoning))
        step = _tool_step(j, own.tool_calls, from_message(recorded.get("tool_calls")),
                          follow, tool_answers.get(j), simulate)
        if isinstance(step, Ended | NeedsTools):
            return step
        messages += step
    return messages


def _tool_step(j: int, own: tuple[ToolCall, ...], recorded: tuple[ToolCall, ...],
               follow: list[dict[str, Any]], simulated: Sequence[str] | None,
               simulate: bool) -> list[dict[str, Any]] | Ended | NeedsTools:
    """What follows turn j's own reply in the arm's history."""
    results = [m for m in follow if m.get("role") == "tool"]
    rest = [m for m in follow if m.get("role") != "tool"]
    if not own and not recorded:
        return follow
    if own and recorded and agree(own, recorded) and len(own) == len(recorded):
        ids = {call.id: mine.id for call, mine in zip(recorded, own, strict=True)}
        return [{**m, "tool_call_id": ids.get(m.get("tool_call_id"), m.get("tool_call_id"))}
                for m in results] + rest
    if not own:
        return Ended(j, f"the recording called {_names(recorded)}, the arm called no tool")
    if simulated is not None:
        answers = [{"role": "tool", "tool_call_id": call.id, "content": text}
                   for call, text in zip(own, simulated, strict=True)]
        return answers + rest
    if simulate:
        return NeedsTools(j, own)
    recorded_words = _names(recorded) if recorded else "no tool"
    return Ended(j, f"the arm called {_names(own)} where the recording called "
                    f"{recorded_words}")


def _names(calls: Sequence[ToolCall]) -> str:
    return ", ".join(f"{c.name}({c.arguments})" for c in calls)


def ask_simulator(simulator: str, call: ToolCall, conversation: str, turn: int) -> str:
    """The tool result the user's simulator gives for `call`: an http(s) URL is POSTed the
    call as JSON and answers with the result (its body, or the `content` of a JSON object);
    anything else is a command run with the call as JSON on stdin, its stdout the result.
    Raises RuntimeError naming the simulator when it fails."""
    query = json.dumps({"name": call.name, "arguments": call.arguments, "id": call.id,
                        "conversation": conversation, "turn": turn + 1}).encode()
    try:
        if simulator.startswith(("http://", "https://")):
            request = urllib.request.Request(simulator, data=query, method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=SIMULATOR_TIMEOUT_S) as response:
                text = response.read().decode()
        else:
            done = subprocess.run(shlex.split(simulator), input=query, capture_output=True,
                                  timeout=SIMULATOR_TIMEOUT_S, check=True)
            text = done.stdout.decode()
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeError(f"tool simulator {simulator!r} failed on {call.name}: {exc}") \
            from exc
    try:
        value = json.loads(text)
    except ValueError:
        return text.strip()
    return str(value["content"]) if isinstance(value, dict) and "content" in value \
        else text.strip()
