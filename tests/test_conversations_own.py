"""`own` conversation mode (issue 54): each arm answers on its own history; divergence is
measured turn by turn. The history builder and its tool steps (pure), a simulator command,
the per-turn gate rules; then real replays: on the echo server (a candidate that answers
other words diverges at turn 1; a candidate killed mid-run is cut at its next turn and a
resume goes on from there), and an A/A on the real model, identical throughout."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
import time
from pathlib import Path
from threading import Thread

import pytest

from layergate.exporters.catalogue import (
    AGREEMENT_AT_TURN,
    BASELINE,
    CANDIDATE,
    CONVERSATION_DIVERGENCE_TURN,
    OVERALL,
    PROMPT_TOKENS_AT_TURN,
    per_turn,
)
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import ToolCall
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.gate.fixed.evaluation import evaluate, run_figures
from layergate.harness.gate.policy import PolicyError, parse_policy
from layergate.harness.processes import free_port
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.replay.own import (
    Ended,
    NeedsTools,
    ask_simulator,
    conversations,
    own_messages,
)
from layergate.harness.report.conversation import diverged_conversation
from layergate.harness.report.html import render_html
from layergate.harness.rundir import RunDir, load_run
from tests.support.echo import echo_server, start_echo

pytestmark = [pytest.mark.locust]
CHAT = "/v1/chat/completions"
WEATHER = [{"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


def _record(rid: str, messages: list[dict], offset: float = 0.0) -> TrafficRecord:
    return TrafficRecord(rid, offset, "chat", CHAT, {"messages": messages, "max_tokens": 6,
                                                      "tools": WEATHER})


def _tool_conversation() -> tuple[TrafficRecord, ...]:
    ask = [{"role": "user", "content": "weather in Paris?"}]
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "rec_1", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]}
    result = {"role": "tool", "tool_call_id": "rec_1", "content": "sunny"}
    reply = {"role": "assistant", "content": "It is sunny."}
    more = {"role": "user", "content": "thanks"}
    return (_record("t-1", ask), _record("t-2", [*ask, call, result], 1.0),
            _record("t-3", [*ask, call, result, reply, more], 2.0))


def _answer(rid: str, text: str = "", calls: tuple[ToolCall, ...] = ()) -> ArmResult:
    return ArmResult(rid, CANDIDATE, "chat", True, output_text=text, tool_calls=calls)


def test_the_turns_of_a_conversation_are_grouped_in_order() -> None:
    turns = _tool_conversation()
    single = TrafficRecord("x", 0.5, "chat", CHAT, {"messages": [{"role": "user",
                                                                  "content": "alone"}]})
    grouped = conversations([turns[2], single, turns[0], turns[1]])
    assert [[r.id for r in c] for c in grouped] == [["t-1", "t-2", "t-3"], ["x"]]


def test_a_call_equal_to_the_recorded_one_gets_the_recorded_result_under_its_own_id() -> None:
    turns = _tool_conversation()
    mine = ToolCall("weather", '{ "city":"Paris" }', id="own_9")  # equal as JSON
    messages = own_messages(turns, 2, [_answer("t-1", calls=(mine,)),
                                       _answer("t-2", "Sunny in Paris.")], {})
    assert isinstance(messages, list)
    assert messages[1]["tool_calls"][0]["id"] == "own_9" and messages[1]["content"] is None
    assert messages[2] == {"role": "tool", "tool_call_id": "own_9", "content": "sunny"}
    assert messages[3] == {"role": "assistant", "content": "Sunny in Paris."}
    assert messages[4]["content"] == "thanks"


def test_a_differing_call_ends_the_conversation_or_asks_the_simulator(tmp_path: Path) -> None:
    turns = _tool_conversation()
    other = ToolCall("weather", '{"city": "Lyon"}', id="own_1")
    ended = own_messages(turns, 1, [_answer("t-1", calls=(other,))], {})
    assert isinstance(ended, Ended) and ended.turn == 0 and "Lyon" in ended.reason
    # a text answer where the recording called a tool: nothing to answer, whatever the simulator
    assert isinstance(own_messages(turns, 1, [_answer("t-1", "no idea")], {}, simulate=True),
                      Ended)
    needs = own_messages(turns, 1, [_answer("t-1", calls=(other,))], {}, simulate=True)
    assert isinstance(needs, NeedsTools) and needs.calls == (other,)
    script = tmp_path / "sim.py"
    script.write_text("import json, sys\ncall = json.load(sys.stdin)\n"
                      "print(json.dumps({'content': 'rain in ' + json.loads(call['arguments'])"
                      "['city']}))\n")
    answer = ask_simulator(f"{sys.executable} {script}", other, "t-1", 0)
    assert answer == "rain in Lyon"
    messages = own_messages(turns, 1, [_answer("t-1", calls=(other,))], {0: (answer,)})
    assert messages[-1] == {"role": "tool", "tool_call_id": "own_1", "content": "rain in Lyon"}
    with pytest.raises(RuntimeError, match="tool simulator"):
        ask_simulator(f"{sys.executable} -c 'raise SystemExit(3)'", other, "t-1", 0)


def test_a_policy_gates_a_turn_of_the_survival_curve() -> None:
    policy = parse_policy({"metrics": {"agreement_at_turn[5]": {"threshold": 0.9},
                                       CONVERSATION_DIVERGENCE_TURN: {"threshold": 3}}})
    assert [r.name for r in policy.rules] == ["agreement_at_turn[5]",
                                              CONVERSATION_DIVERGENCE_TURN]
    for bad in ("agreement_at_turn[0]", "agreement_at_turn[x]", "exact_match[2]"):
        with pytest.raises(PolicyError, match="take a turn"):
            parse_policy({"metrics": {bad: {"threshold": 0.9}}})


def _traffic(path: Path, conversations_: int, turns: int, gap: float) -> Path:
    with path.open("w") as fh:
        for c in range(conversations_):
            messages = [{"role": "user", "content": f"conversation {c} opens here"}]
            for t in range(turns):
                fh.write(json.dumps({"id": f"c{c}-t{t + 1}", "offset_s": c * 0.05 + t * gap,
                                     "scenario": "chat", "endpoint": CHAT,
                                     "body": {"messages": messages, "max_tokens": 4}}) + "\n")
                messages = [*messages, {"role": "assistant", "content": f"recorded {t}"},
                            {"role": "user", "content": f"then {t}"}]
    return path


def _by_turn(run_dir: Path, name: str, arm: str = CANDIDATE) -> list[float | None]:
    figures = run_figures(load_run(run_dir), MetricsConfig(min_samples=1, n_resamples=200))
    values = {f.name: f.value for f in figures if f.arm == arm and f.scenario == OVERALL}
    return [values.get(per_turn(name, k)) for k in range(1, 4)] if name != \
        CONVERSATION_DIVERGENCE_TURN else [values.get(name)]


def test_own_mode_replays_each_arm_on_its_own_history(echo: str, tmp_path: Path) -> None:
    traffic = _traffic(tmp_path / "t.jsonl", 3, 3, 0.2)
    with echo_server("--garble") as garbled:
        out = run_replay(ReplayConfig(out=tmp_path / "run", traffic=traffic,
                                      arms={BASELINE: echo, "baseline2": echo,
                                            CANDIDATE: garbled},
                                      conversation_mode="own", progress=False, timeout=10))
    manifest = RunDir(out).read_manifest()
    assert manifest.status == "complete" and manifest.config["conversation_mode"] == "own"
    store = RunDir(out).open_store()
    rows = {(r.request_id, r.arm): r for r in store.results()}
    store.close()
    # turn 2 of the garbled arm holds its own (garbled) answer to turn 1, not the recorded one
    assert rows[("c0-t2", CANDIDATE)].prompt_tokens == rows[("c0-t2", BASELINE)].prompt_tokens
    assert "recorded" not in rows[("c0-t2", CANDIDATE)].output_text
    assert _by_turn(out, AGREEMENT_AT_TURN) == [0.0, 0.0, 0.0]
    assert _by_turn(out, AGREEMENT_AT_TURN, "baseline2") == [1.0, 1.0, 1.0]
    assert _by_turn(out, CONVERSATION_DIVERGENCE_TURN) == [1.0]
    assert _by_turn(out, CONVERSATION_DIVERGENCE_TURN, "baseline2") == [4.0]
    prompts = _by_turn(out, PROMPT_TOKENS_AT_TURN, BASELINE)
    assert prompts[0] < prompts[1] < prompts[2]  # the history grows
    # the HTML report shows one diverged conversation side by side, turn by turn
    section = diverged_conversation(evaluate(out))
    assert "first differed at turn 1" in section and "own mode" in section
    assert section.count("<b>differs</b>") == 1 and "turn 3" in section
    assert "<del>" in section and "<ins>" in section
    assert section in render_html(evaluate(out))


def test_a_conversation_cut_by_an_error_is_recorded_cut_and_a_resume_goes_on(
        echo: str, tmp_path: Path) -> None:
    traffic = _traffic(tmp_path / "t.jsonl", 2, 3, 1.5)
    port = free_port()
    candidate = start_echo(port)
    arms = {BASELINE: echo, CANDIDATE: candidate.url}
    config = ReplayConfig(out=tmp_path / "run", traffic=traffic, arms=arms, progress=False,
                          conversation_mode="own", timeout=5, preflight_timeout=5)
    Thread(target=_stop_after_first_turns, args=(tmp_path / "run", candidate)).start()
    out = run_replay(config)
    store = RunDir(out).open_store()
    rows = {(r.request_id, r.arm): r for r in store.results()}
    store.close()
    for c in ("c0", "c1"):
        assert rows[(f"{c}-t1", CANDIDATE)].ok and not rows[(f"{c}-t2", CANDIDATE)].ok
        assert (f"{c}-t3", CANDIDATE) not in rows  # cut: never sent, never an answer
        assert rows[(f"{c}-t3", BASELINE)].ok
    assert RunDir(out).read_manifest().status == "complete"
    # cut conversations are left out from the cut on, never counted identical or diverged
    assert _by_turn(out, AGREEMENT_AT_TURN) == [1.0, None, None]
    candidate = start_echo(port)
    try:
        time.sleep(0.2)
        run_replay(ReplayConfig(out=tmp_path / "run", arms=arms, resume=True, progress=False,
                                timeout=5))
    finally:
        candidate.stop()
    store = RunDir(out).open_store()
    rows = {(r.request_id, r.arm): r for r in store.results()}
    store.close()
    assert all(rows[(f"{c}-t{t}", CANDIDATE)].ok for c in ("c0", "c1") for t in (1, 2, 3))
    assert rows[("c0-t3", CANDIDATE)].prompt_tokens == rows[("c0-t3", BASELINE)].prompt_tokens
    assert _by_turn(out, AGREEMENT_AT_TURN) == [1.0, 1.0, 1.0]


def _stop_after_first_turns(run_dir: Path, server) -> None:
    """Stop the candidate's server once both its first turns are in (turn 2 is 1.5 s on)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        store = run_dir / "results.sqlite"
        if store.is_file():
            with sqlite3.connect(store) as conn:
                with contextlib.suppress(sqlite3.OperationalError):
                    if conn.execute("SELECT COUNT(*) FROM results WHERE arm = ? AND "
                                    "request_id LIKE '%-t1'", (CANDIDATE,)).fetchone()[0] == 2:
                        break
        time.sleep(0.05)
    server.stop()


@pytest.mark.model
def test_an_aa_run_in_own_mode_on_the_real_model_is_identical_throughout(
        full_engine, tmp_path: Path) -> None:
    traffic = _traffic(tmp_path / "t.jsonl", 2, 3, 0.0)
    url = full_engine.url
    out = run_replay(ReplayConfig(out=tmp_path / "run", traffic=traffic,
                                  arms={BASELINE: url, "baseline2": url, CANDIDATE: url},
                                  conversation_mode="own", progress=False, timeout=120))
    assert _by_turn(out, AGREEMENT_AT_TURN) == [1.0, 1.0, 1.0]
    assert _by_turn(out, CONVERSATION_DIVERGENCE_TURN) == [4.0]
