"""The bundled tool-calling conversations (scenarios/traffic/tool-conversations.jsonl,
provenance in scenarios/README.md): conversations the replay groups turn by turn, each turn
the one before it with the recorded reply, the tool results of its calls and the next
user message; then replayed in `own` mode on the bundled model, where a full-depth arm
makes the recorded calls at every turn, and where calls that differ are answered by a tool
simulator at a URL."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from layergate.exporters.traffic import read_traffic
from layergate.harness.replay.own import conversations
from layergate.reference_engine.server.schemas import ChatCompletionRequest

TRAFFIC = Path(__file__).resolve().parent.parent / "scenarios" / "traffic"
CONVERSATIONS = TRAFFIC / "tool-conversations.jsonl"


def test_the_file_holds_conversations_of_three_to_five_turns_with_their_tool_results():
    records = read_traffic(CONVERSATIONS).records
    assert [r.id for r in records] == [f"tconv-{i:04d}" for i in range(1, len(records) + 1)]
    offsets = [r.offset_s for r in records]
    assert offsets == sorted(offsets) and offsets[0] == 0
    others = [json.loads(line)["id"] for path in TRAFFIC.glob("*.jsonl")
              if path != CONVERSATIONS for line in path.read_text().splitlines()]
    assert not {r.id for r in records} & set(others)
    convs = conversations(records)
    assert len(convs) == 15 and Counter(len(c) for c in convs) == {3: 6, 4: 6, 5: 3}
    calls = 0
    for turns in convs:
        for before, after in zip(turns, turns[1:], strict=False):
            ChatCompletionRequest.model_validate(after.body)  # the engine's own schema
            assert after.body["tools"] and after.body["temperature"] == 0
            old, new = before.body["messages"], after.body["messages"]
            assert new[:len(old)] == old and new[-1]["role"] == "user"
            reply, *follow = new[len(old):-1]
            assert reply["role"] == "assistant"
            ids = [c["id"] for c in reply.get("tool_calls", ())]
            assert [m["tool_call_id"] for m in follow] == ids  # a result per call, in order
            calls += bool(ids)
    assert calls == 36  # of 42 recorded replies (scenarios/README.md)
