"""What an answer is made of besides its text: tool calls merged by index, the legacy
function_call, reasoning under both of its names, refusals and reasoning tokens, streamed
and not; malformed parts recorded as what they are; the store keeps them; the figures see a
changed tool call, a dropped reasoning and a broken schema, and the gate fails them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from layergate.exporters.catalogue import (
    TOOL_ARGUMENTS_UNPARSED,
    TOOL_CALL_MALFORMED,
    TOOL_CALL_ORDER,
)
from layergate.exporters.figures import OVERALL
from layergate.exporters.figures.columns import from_results
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import ToolCall, differing_keys
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.gate import apply_policy
from layergate.harness.gate.policy import load_policy
from layergate.harness.openai_stream import (
    ResultBuilder,
    StreamAccumulator,
    StreamError,
    reasoning_count,
)
from layergate.harness.store import ResultStore

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"},
                                     "unit": {"enum": ["C", "F"]}},
    "required": ["city"], "additionalProperties": False}}}
RECORD = TrafficRecord("r1", 0.0, "tools", "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "weather?"}],
                        "tools": [WEATHER]})


def _chunk(delta: dict | None = None, finish: str | None = None, **top) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta,
                                         "finish_reason": finish}]
    return "data: " + json.dumps({"id": "x", "choices": choices, **top})


def _result(lines: list[str], record: TrafficRecord = RECORD) -> ArmResult:
    acc = StreamAccumulator()
    for i, line in enumerate(lines):
        acc.feed_line(line, 0.05 * (i + 1))
    acc.feed_line("data: [DONE]", 1.0)
    return ResultBuilder(record, "candidate", 0.0, body=dict(record.body)).finished(
        200, acc, 1.0)


def _call(index: int, args: str, name: str | None = None, call_id: str | None = None
          ) -> dict:
    function = {"arguments": args} | ({"name": name} if name else {})
    return {"tool_calls": [{"index": index, "function": function}
                           | ({"id": call_id, "type": "function"} if call_id else {})]}


def test_streamed_tool_calls_are_merged_by_index_and_checked_against_the_schema() -> None:
    r = _result([_chunk({"role": "assistant"}),
                 _chunk(_call(0, "", "get_weather", "call_a")),
                 _chunk(_call(0, '{"city": "Pa')),
                 _chunk(_call(0, 'ris"}')),
                 _chunk(_call(1, '{"city": "Lyon", "unit": "K"}', "get_weather", "call_b")),
                 _chunk({}, "tool_calls"),
                 _chunk(usage={"prompt_tokens": 9, "completion_tokens": 4})])
    assert r.ok and r.finish_reason == "tool_calls" and r.output_text == ""
    assert [(c.name, c.id, c.canonical()) for c in r.tool_calls] == [
        ("get_weather", "call_a", '{"city":"Paris"}'),
        ("get_weather", "call_b", '{"city":"Lyon","unit":"K"}')]
    assert r.ttft_s == r.answer_ttft_s == 0.1  # the name is the first generated token
    assert r.schema_valid == {"tool_calls": False}  # "K" is not in the enum
    assert r.answer == ('get_weather({"city":"Paris"})\n'
                        'get_weather({"city":"Lyon","unit":"K"})')
    assert r.quirks == ()


def test_the_legacy_function_call_is_call_zero() -> None:
    r = _result([_chunk({"function_call": {"name": "get_weather", "arguments": ""}}),
                 _chunk({"function_call": {"arguments": '{"city": "Paris"}'}}),
                 _chunk({}, "function_call")])
    assert [(c.index, c.name, c.arguments) for c in r.tool_calls] == [
        (0, "get_weather", '{"city": "Paris"}')]
    assert r.schema_valid == {"tool_calls": True}


def test_reasoning_under_either_name_times_the_first_token_and_the_first_answer() -> None:
    for field in ("reasoning", "reasoning_content"):
        r = _result([_chunk({"role": "assistant", "content": ""}),
                     _chunk({field: "Let me"}), _chunk({field: " think."}),
                     _chunk({"content": "Paris"}), _chunk({}, "stop"),
                     _chunk(usage={"prompt_tokens": 5, "completion_tokens": 4,
                                   "completion_tokens_details": {"reasoning_tokens": 3}})])
        assert (r.reasoning_text, r.output_text, r.reasoning_tokens) == (
            "Let me think.", "Paris", 3), field
        assert (r.ttft_s, r.answer_ttft_s) == (0.1, 0.2)  # TTFT: the first token of any kind
        assert r.itl_s == pytest.approx((0.05, 0.05)) and r.output_tokens == 4
        assert r.answer == "Paris"  # the reasoning is not part of the answer


def test_a_refusal_is_part_of_the_answer() -> None:
    r = _result([_chunk({"refusal": "I can't"}), _chunk({"refusal": " help."}),
                 _chunk({}, "stop")])
    assert r.refusal == "I can't help." and r.answer == "refusal: I can't help."


def test_a_non_streamed_answer_reads_as_the_same_stream() -> None:
    acc = StreamAccumulator()
    acc.feed_response({"id": "y", "model": "m", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "reasoning_content": "hmm",
            "tool_calls": [{"id": "c", "type": "function", "function": {
                "name": "get_weather", "arguments": '{"city":"Paris"}'}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 7}}, 0.4)
    r = ResultBuilder(RECORD, "baseline", 0.0, body=dict(RECORD.body)).finished(200, acc, 0.4)
    assert r.ok and r.reasoning_text == "hmm" and r.tool_calls[0].canonical() == \
        '{"city":"Paris"}'
    assert r.schema_valid == {"tool_calls": True}
    back = acc.to_response("/v1/chat/completions")["choices"][0]["message"]
    assert back["content"] is None and back["reasoning"] == "hmm"
    assert back["tool_calls"][0]["function"] == {"name": "get_weather",
                                                 "arguments": '{"city":"Paris"}'}


def test_malformed_parts_are_recorded_as_what_they_are_and_the_answer_kept() -> None:
    r = _result([_chunk(_call(1, '{"city": "Lyon"}', "get_weather")),  # 1 before 0
                 _chunk(_call(0, '{"city": "Par', "get_weather")),  # never closes
                 _chunk({"tool_calls": {"index": 0}}),  # not a list
                 _chunk({"tool_calls": [{"function": {"arguments": "x"}}]}),  # no index
                 _chunk({}, "tool_calls")])
    assert r.ok and [c.index for c in r.tool_calls] == [0, 1]
    assert r.tool_calls[0].canonical() is None and r.tool_calls[0].arguments == \
        '{"city": "Par'
    assert set(r.quirks) >= {TOOL_CALL_ORDER, TOOL_CALL_MALFORMED, TOOL_ARGUMENTS_UNPARSED}
    assert r.schema_valid == {"tool_calls": False}


def test_the_structured_output_is_checked_against_its_response_format() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
              "required": ["n"]}
    record = TrafficRecord("r2", 0.0, "json", "/v1/chat/completions", {
        "messages": [], "response_format": {"type": "json_schema", "json_schema": {
            "name": "n", "schema": schema}}})
    good = _result([_chunk({"content": '{"n": 2}'}), _chunk({}, "stop")], record)
    bad = _result([_chunk({"content": '{"n": 0}'}), _chunk({}, "stop")], record)
    prose = _result([_chunk({"content": "two"}), _chunk({}, "stop")], record)
    assert [x.schema_valid for x in (good, bad, prose)] == [
        {"structured": True}, {"structured": False}, {"structured": False}]


def test_the_store_keeps_every_part_and_reads_the_same_columns(tmp_path: Path) -> None:
    results = _run(candidate_city="Lyon")
    with ResultStore(tmp_path / "r.sqlite") as store:
        for r in results:
            store.put(r)
        assert sorted(store.results(), key=_key) == sorted(results, key=_key)
        scanned = store.scan().replay
    direct = from_results(results)
    order = np.lexsort((direct.arm.astype(str), direct.request_id.astype(str)))
    back = np.lexsort((scanned.arm.astype(str), scanned.request_id.astype(str)))
    np.testing.assert_array_equal(direct.parts[order], scanned.parts[back])
    np.testing.assert_array_equal(direct.part_keys[order], scanned.part_keys[back])
    np.testing.assert_array_equal(direct.text_key[order], scanned.text_key[back])


def _key(r: ArmResult) -> tuple[str, str]:
    return r.request_id, r.arm


def _run(candidate_city: str = "Paris", candidate_reasons: bool = True, n: int = 24
         ) -> list[ArmResult]:
    """Three arms answering n tool-calling requests after reasoning; the candidate's city
    and whether it reasons are the plants."""
    out = []
    for i in range(n):
        for arm in ("baseline", "baseline2", "candidate"):
            city = candidate_city if arm == "candidate" else "Paris"
            thinks = arm != "candidate" or candidate_reasons
            out.append(ArmResult(
                request_id=f"q{i:02d}", arm=arm, scenario="tools", ok=True, ttft_s=0.05,
                e2e_s=0.5 + 0.01 * (i % 3), itl_s=(0.05,) * 5, output_tokens=12,
                prompt_tokens=30, finish_reason="tool_calls", tokens_from="usage",
                tool_calls=(ToolCall("get_weather", json.dumps({"city": city}), "c0"),),
                reasoning_text="Let me think." if thinks else "",
                reasoning_tokens=4 if thinks else 0,
                answer_ttft_s=0.3 if thinks else 0.05, schema_valid={"tool_calls": True}))
    return out


def _figures(results: list[ArmResult]) -> dict[str, object]:
    figures = compute_figures(results, config=MetricsConfig(n_resamples=200))
    return {f.name: f for f in figures if f.arm == "candidate" and f.scenario == OVERALL}


def _verdict(results: list[ArmResult]) -> str:
    policy = load_policy("no-regression")
    figures = compute_figures(results, config=MetricsConfig(n_resamples=200))
    arms = {"baseline": "http://a", "baseline2": "http://a2", "candidate": "http://b"}
    manifest = {"id": "t", "status": "complete", "arms": arms}
    return apply_policy(policy, figures, manifest, results).verdict


def test_an_identical_candidate_agrees_on_every_part_and_passes() -> None:
    got = _figures(_run())
    for name in ("tool_call_agreement", "answer_match", "reasoning_kept", "exact_match"):
        assert got[name].value == 1.0 and got[name].detail["excess"] == 0.0, name
    assert got["reasoning_length_ratio"].value == 1.0
    assert got["ttfat_p50"].value == 0.3 and got["ttft_p50"].value == 0.05
    assert _verdict(_run()) == "pass"


def test_a_candidate_that_changes_every_call_fails_though_its_calls_are_valid() -> None:
    results = _run(candidate_city="Lyon")
    got = _figures(results)
    assert got["tool_call_agreement"].value == 0.0
    assert got["tool_call_agreement"].detail["differing"] == {"get_weather.city": 24}
    assert got["tool_call_validity"].value == 1.0  # still valid: agreement is what breaks
    assert got["exact_match"].value == 0.0 and got["answer_match"].value == 0.0
    assert _verdict(results) == "fail"


def test_a_candidate_that_drops_the_reasoning_fails() -> None:
    results = _run(candidate_reasons=False)
    got = _figures(results)
    assert got["reasoning_kept"].value == 0.0 and got["answer_match"].value == 1.0
    assert got["reasoning_length_ratio"].value == 0.0
    assert _verdict(results) == "fail"


def test_differing_keys_names_the_argument() -> None:
    a = (ToolCall("f", '{"x": 1, "y": [1, 2]}'),)
    assert differing_keys(a, (ToolCall("f", '{"y": [1, 2], "x": 1}'),)) == []
    assert differing_keys(a, (ToolCall("f", '{"x": 2, "y": [1, 2], "z": 0}'),)) == [
        "f.x", "f.z"]
    assert differing_keys(a, (ToolCall("g", "{}"),)) == ["f"]
    assert differing_keys(a, ()) == ["f"]


def test_a_result_with_parts_crosses_from_worker_to_master_unchanged() -> None:
    import msgpack

    from layergate.harness.replay.channel import result_from_json, result_to_json

    r = _run(candidate_city="Lyon")[2]
    wire = msgpack.unpackb(msgpack.packb(result_to_json(r)))  # as Locust's channel packs it
    assert result_from_json(wire) == r


STREAMS = Path(__file__).parent / "fixtures" / "streams"
PARIS = '{"city":"Paris","unit":"celsius"}'
BOTH = [("get_weather", PARIS), ("get_time", '{"city":"Paris"}')]


def _read_fixture(name: str) -> StreamAccumulator:
    acc = StreamAccumulator()
    path = STREAMS / name
    if name.endswith(".json"):
        acc.feed_response(json.loads(path.read_text(encoding="utf-8")), 0.1)
    else:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            acc.feed_line(line, 0.01 * i)
    return acc


# what each server really sent (tests/fixtures/streams/README.md: the requests and
# commands): (finish_reason, calls as (name, canonical arguments), reasoning begins,
# content begins, quirks)
RECORDED = {
    "vllm_0.32_tool_calls.txt": ("tool_calls", BOTH, "", "", []),
    "vllm_0.32_tool_calls_response.json": ("tool_calls", BOTH, "", "", []),
    # both parsers on one vLLM: streamed, the call is never parsed (docs/SERVERS.md)
    "vllm_0.32_tool_calls_both_parsers.txt": ("stop", [], "", "[get_weather(", []),
    "vllm_0.32_tool_calls_both_parsers_response.json": ("tool_calls", BOTH, "", "", []),
    "vllm_0.32_tool_choice_named.txt": ("stop", [("get_weather", PARIS)], "", "", []),
    "vllm_0.32_tool_choice_named_response.json": ("stop", [("get_weather", PARIS)], "", "",
                                                  []),
    # cut by max_tokens: the second call's arguments never close, kept as sent
    "vllm_0.32_tool_choice_required_length.txt": (
        "length", [("get_time", '{"city":"Paris"}'), ("get_time", None)], "", "",
        [TOOL_ARGUMENTS_UNPARSED]),
    "vllm_0.32_reasoning.txt": ("stop", [], " France is", " Paris", []),
    "vllm_0.32_reasoning_response.json": ("stop", [], " France is", " Paris", []),
    "vllm_0.32_reasoning_logprobs.txt": ("stop", [], " France is", " Paris", []),
    "vllm_0.32_reasoning_late_marker.txt": ("length", [], "", "The largest planet", []),
    "vllm_0.32_json_schema.txt": ("stop", [], "", "{", []),
    # llama-cpp-python repeats the id and name on every chunk and copies each delta into
    # the legacy function_call: read once, not twice
    "llamacpp_python_tool_choice_named.txt": ("tool_calls", [("get_weather", PARIS)], "", "",
                                              []),
    "llamacpp_python_tool_choice_named_response.json": (
        "tool_calls", [("get_weather", PARIS)], "", "", []),
    "llamacpp_python_tools.txt": ("stop", [], "", "[get_weather(", []),
    "sglang_0.5.23_reasoning_tool_calls.txt": (
        "tool_calls", [("get_weather", PARIS)], "\nThe user wants", "", []),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_server_s_recorded_answer_reads_as_it_was_sent(name: str) -> None:
    finish, calls, reasoning, content, problems = RECORDED[name]
    acc = _read_fixture(name)
    assert acc.finish_reason == finish
    assert [(c.name, c.canonical()) for c in acc.tool_calls] == calls
    assert acc.reasoning_text.startswith(reasoning) and bool(acc.reasoning) == bool(reasoning)
    assert acc.output_text.startswith(content)
    assert acc.calls.problems == problems


def test_a_server_s_error_event_mid_stream_fails_the_answer() -> None:
    with pytest.raises(StreamError, match="Invalid type: objekt"):
        _read_fixture("vllm_0.32_schema_error.txt")


def test_vllm_s_zero_reasoning_tokens_beside_its_reasoning_is_no_count() -> None:
    """vLLM's granite parser streams reasoning and reports reasoning_tokens 0: the count
    is then the tokenizer's, or none (the figures compare characters), never 0."""
    acc = _read_fixture("vllm_0.32_reasoning.txt")
    assert acc.reasoning_tokens == 0 and acc.reasoning
    assert reasoning_count(acc, None) is None
