"""The bundled tool-calling conversations (scenarios/traffic/tool-conversations.jsonl,
provenance in scenarios/README.md): conversations the replay groups turn by turn, each turn
the one before it with the recorded reply, the tool results of its calls and the next
user message; then replayed in `own` mode on the bundled model, where a full-depth arm
makes the recorded calls at every turn, and where calls that differ are answered by a tool
simulator at a URL."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest

from layergate.exporters.catalogue import BASELINE, CANDIDATE
from layergate.exporters.tool_calls import agree, from_message
from layergate.exporters.traffic import read_traffic, write_traffic
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.replay.own import conversations
from layergate.harness.rundir import RunDir
from layergate.reference_engine.server.schemas import ChatCompletionRequest

TRAFFIC = Path(__file__).resolve().parent.parent / "scenarios" / "traffic"
CONVERSATIONS = TRAFFIC / "tool-conversations.jsonl"
pytestmark = [pytest.mark.locust]


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


def _simulator() -> tuple[ThreadingHTTPServer, list[dict]]:
    """A tool simulator at a URL: answers each POSTed call with a JSON object's `content`,
    and keeps what it was asked."""
    asked: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            call = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append(call)
            body = json.dumps({"content": f"simulated {call['name']}"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    return server, asked


def _opening(turns) -> str:
    """What the user said first (after the few-shot turns)."""
    return turns[0].body["messages"][-1]["content"]


@pytest.mark.model
def test_own_mode_on_the_bundled_model_makes_the_recorded_calls_and_asks_a_url_simulator(
        full_engine, tmp_path: Path) -> None:
    """One bundled conversation of 3 turns, replayed in own mode on the full-depth engine:
    it makes the recorded calls at every turn, so it gets the recorded results and never
    asks the simulator. Then the first 2 turns of another whose recorded call was changed:
    the engine's own call differs from it, so the simulator at a URL answers, and its answer
    is stored beside the run."""
    convs = {c[0].id: c for c in conversations(read_traffic(CONVERSATIONS).records)}
    kept = next(c for c in convs.values() if len(c) == 3
                and _opening(c).startswith("Convert 1000 yen"))
    changed = next(c for c in convs.values() if _opening(c).startswith("How much is 75"))
    first, second = changed[0], changed[1]
    messages = json.loads(json.dumps(second.body["messages"]))
    call = messages[len(first.body["messages"])]["tool_calls"][0]["function"]
    call["arguments"] = call["arguments"].replace("75", "76")  # not what the model calls
    traffic = tmp_path / "t.jsonl"
    write_traffic(traffic, [*kept, first, replace(second, body={**second.body,
                                                                 "messages": messages})])
    server, asked = _simulator()
    url = full_engine.url
    try:
        out = run_replay(ReplayConfig(
            out=tmp_path / "run", traffic=traffic, arms={BASELINE: url, CANDIDATE: url},
            conversation_mode="own", progress=False, timeout=300, speed=100,
            tool_simulator=f"http://127.0.0.1:{server.server_port}/tool"))
    finally:
        server.shutdown()
    store = RunDir(out).open_store()
    rows = {(r.request_id, r.arm): r for r in store.results()}
    store.close()
    assert len(rows) == 10 and all(r.ok for r in rows.values())
    for before, after in zip(kept, kept[1:], strict=False):
        recorded = after.body["messages"][len(before.body["messages"])]
        assert agree(rows[(before.id, BASELINE)].tool_calls,
                     from_message(recorded["tool_calls"]))  # names, arguments as JSON
    # the changed call: each arm's own call was sent to the simulator, answered and stored
    assert sorted(a["name"] for a in asked) == ["convert_currency"] * 2
    assert {(a["conversation"], a["turn"]) for a in asked} == {(first.id, 1)}
    with sqlite3.connect(out / "results.sqlite") as conn:
        stored = conn.execute("SELECT request_id, arm, answers FROM tool_answers").fetchall()
        ended = conn.execute("SELECT COUNT(*) FROM conversation_ends").fetchone()[0]
    assert sorted(stored) == sorted((first.id, arm, json.dumps(["simulated convert_currency"]))
                                    for arm in (BASELINE, CANDIDATE))
    assert ended == 0
