"""Imported traces keep their conversations turn by turn, as `replay --conversation-mode
own` needs them (docs/FORMATS.md, "Conversation modes"): Mooncake sessions (rows with a
`session_id`) become chat turns each holding the session so far, and an OpenAI chat log
with tool messages (the `sharegpt` format's `messages` shape) becomes turns that an arm
answering as recorded rebuilds exactly: its reply, the recorded tool results, the next
message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import from_message
from layergate.exporters.traffic import read_traffic
from layergate.harness.replay.own import conversations, own_messages
from layergate.harness.traces import TraceImportConfig, import_trace
from layergate.harness.traces.source import TraceError

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"


def _import(tmp_path: Path, fmt: str, name: str | Path, **options):
    out = tmp_path / f"{Path(name).stem}.jsonl"
    import_trace(TraceImportConfig(format=fmt, source=TRACES / name, out=out, **options))
    return read_traffic(out).records


def test_mooncake_sessions_become_conversations_turn_by_turn(tmp_path: Path) -> None:
    records = _import(tmp_path, "mooncake", "mooncake_sessions.jsonl", block_size=16)
    # in time order, the sessions interleaved; a later turn's delay counts from the one before
    assert [(r.id, r.offset_s) for r in records] == [
        ("mooncake-1", 0.0), ("mooncake-4", 1.0), ("mooncake-5", 1.5), ("mooncake-2", 4.0),
        ("mooncake-3", 7.0)]
    convs = {c[0].id: [r.id for r in c] for c in conversations(records)}
    assert convs == {"mooncake-1": ["mooncake-1", "mooncake-2", "mooncake-3"],
                     "mooncake-4": ["mooncake-4", "mooncake-5"]}
    by_id = {r.id: r for r in records}
    last = by_id["mooncake-3"].body["messages"]
    # the made-up words are one token each: the new inputs and replies have their lengths
    assert [(m["role"], len(m["content"].split())) for m in last] == [
        ("user", 30), ("assistant", 5), ("user", 12), ("assistant", 6), ("user", 8)]
    assert by_id["mooncake-2"].body["messages"] == last[:3]
    assert [r.body["max_tokens"] for r in records] == [5, 3, 1, 6, 4]  # 0 asks for 1
    # sampled whole: a session's turns are kept or left out together
    sessions = ({"mooncake-1", "mooncake-2", "mooncake-3"}, {"mooncake-4", "mooncake-5"})
    for seed in range(1, 7):
        try:
            kept = {r.id for r in _import(tmp_path / str(seed), "mooncake",
                                          "mooncake_sessions.jsonl", block_size=16,
                                          sample=0.5, seed=seed)}
        except TraceError:  # both sessions left out: nothing to write
            continue
        assert all(kept >= s or not kept & s for s in sessions), (seed, kept)


def test_a_session_turn_without_its_time_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"session_id": "x", "input_length": 5, "output_length": 2})
                   + "\n")
    with pytest.raises(TraceError, match="timestamp.*first turn"):
        _import(tmp_path, "mooncake", bad)


def test_an_openai_chat_log_with_tool_messages_replays_turn_by_turn(tmp_path: Path) -> None:
    records = _import(tmp_path, "sharegpt", "sharegpt_messages.jsonl")
    convs = [c for c in conversations(records) if len(c) > 1]
    assert [[r.id for r in c] for c in convs] == [["sharegpt-1-1", "sharegpt-1-2"],
                                                   ["sharegpt-2-1", "sharegpt-2-2"]]
    for turns in convs:
        answers = []
        for k, turn in enumerate(turns):
            built = own_messages(turns, k, answers, {})
            # an arm that answered as recorded gets the recorded tool results and history
            assert [_plain(m) for m in built] == [_plain(m) for m in turn.body["messages"]]
            message = turn.response["choices"][0]["message"]
            answers.append(ArmResult(turn.id, "baseline", turn.scenario, True,
                                     output_text=message.get("content") or "",
                                     tool_calls=from_message(message.get("tool_calls"))))


def _plain(message: dict) -> dict:
    """A message as the server reads it: no null content, reasoning left out (own mode's
    default), calls as name, arguments and id."""
    out = {k: v for k, v in message.items()
           if v is not None and k not in ("reasoning_content", "tool_calls")}
    if message.get("tool_calls"):
        out["tool_calls"] = [(c["id"], c["function"]["name"], c["function"]["arguments"])
                             for c in message["tool_calls"]]
    return out
