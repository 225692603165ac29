"""Traffic that calls tools (issue 51): `capture` keeps a request's `tools`, `tool_choice`,
`response_format`, `parallel_tool_calls` and its history of tool calls and results verbatim,
and the recorded answer with its calls; `import-trace` keeps them where the format carries
them: OpenAI batch (the input bodies, and the output file's response bodies through
`--responses`), and ShareGPT-style logs with tool turns (glaive's function_call /
observation, hermes' <tool_call> / <tool_response> and <tools>, OpenAI `messages`)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from layergate.exporters import tokenizer
from layergate.exporters.traffic import TrafficError, parse_record, read_traffic
from layergate.harness.capture import CaptureConfig, CaptureProxy
from layergate.harness.cli import main
from layergate.harness.traces import (
    TraceError,
    TraceImportConfig,
    TraceImportConfigError,
    import_trace,
)

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
CHAT = "/v1/chat/completions"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
# a vLLM-style call id: long enough, with digits and letters, for --redact to take it for a key
CALL_ID = "chatcmpl-tool-9f8e7d6c5b4a39281706f5e4d3c2b1a0"


@pytest.fixture(scope="module")
def tok() -> str:
    """The embedded model's tokenizer.json (converted once, like the engine does)."""
    from layergate.reference_engine.loading import ensure_converted

    return str(ensure_converted() / "tokenizer.json")


# --- capture ---------------------------------------------------------------------------

def _request_with_tools() -> dict[str, Any]:
    """A second turn of an agent: the history holds the assistant's call (no content, as
    OpenAI clients send it) and the tool's result."""
    return {"model": "m", "max_tokens": 64, "temperature": 0,
            "tools": [WEATHER], "tool_choice": "auto", "parallel_tool_calls": False,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "answer", "strict": True,
                "schema": {"type": "object", "properties": {"text": {"type": "string"}},
                           "required": ["text"]}}},
            "messages": [
                {"role": "user", "content": "Weather in Paris? Mail it to jane.doe@example.org"},
                {"role": "assistant", "tool_calls": [
                    {"id": CALL_ID, "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                {"role": "tool", "tool_call_id": CALL_ID,
                 "content": '{"temperature": 18, "contact": "meteo@example.fr"}'},
                {"role": "user", "content": "And in Rome?"}]}


def _answer_with_call() -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "reasoning": "Rome next.",
                "tool_calls": [{"id": "call_rome", "type": "function", "function": {
                    "name": "get_weather", "arguments": '{"city": "Rome"}'}}]}}],
            "usage": {"prompt_tokens": 80, "completion_tokens": 14, "total_tokens": 94}}


def _sse(chunks: list[dict[str, Any]]) -> bytes:
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


def _upstream(data: bytes | dict[str, Any]) -> Callable[[], httpx.Response]:
    """An upstream's answer as the proxy reads it: a stream of bytes, not yet read."""
    streamed = isinstance(data, bytes)
    raw = data if streamed else json.dumps(data).encode()
    kind = "text/event-stream" if streamed else "application/json"
    return lambda: httpx.Response(200, headers={"content-type": kind},
                                  stream=httpx.ByteStream(raw))


def _captured(tmp_path: Path, body: dict[str, Any], upstream: Callable[[], httpx.Response],
              **config: Any) -> tuple[httpx.Response, dict[str, Any], list]:
    """Send `body` through the real capture proxy (its ASGI app) to an upstream answering
    `upstream()`: (the client's answer, what the upstream was sent, the records written)."""
    out = tmp_path / "captured.jsonl"
    proxy = CaptureProxy(CaptureConfig(upstream="http://upstream", out=out, **config))
    seen: dict[str, Any] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        seen.update(json.loads(request.content))
        return upstream()

    async def go() -> httpx.Response:
        proxy.client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=proxy),
                                         base_url="http://proxy") as client:
                return await client.post(CHAT, json=body)
        finally:
            await proxy.client.aclose()

    reply = asyncio.run(go())
    return reply, seen, list(read_traffic(out).records) if out.exists() else []


def test_capture_keeps_the_tools_the_history_of_calls_and_the_recorded_calls(tmp_path) -> None:
    body = _request_with_tools()
    answer = _answer_with_call()
    reply, seen, records = _captured(
        tmp_path, body, _upstream(answer))
    assert reply.status_code == 200 and reply.json() == answer
    assert seen == body  # forwarded as the client sent it
    (record,) = records  # a history whose assistant message has no content is recorded
    assert record.endpoint == CHAT and dict(record.body) == body
    assert record.response == answer  # non-streamed: kept as the server sent it


def test_capture_rebuilds_a_streamed_tool_call(tmp_path) -> None:
    body = {**_request_with_tools(), "stream": True,
            "stream_options": {"include_usage": True}}
    call = {"index": 0, "id": "call_rome", "type": "function",
            "function": {"name": "get_weather", "arguments": ""}}
    chunks = [
        {"id": "chatcmpl-2", "model": "m", "choices": [
            {"index": 0, "delta": {"role": "assistant", "reasoning": "Rome "}}]},
        {"id": "chatcmpl-2", "model": "m", "choices": [
            {"index": 0, "delta": {"reasoning": "next."}}]},
        {"id": "chatcmpl-2", "model": "m", "choices": [
            {"index": 0, "delta": {"tool_calls": [call]}}]},
        {"id": "chatcmpl-2", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": '{"city": '}}]}}]},
        {"id": "chatcmpl-2", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": '"Rome"}'}}]}}]},
        {"id": "chatcmpl-2", "model": "m", "choices": [
            {"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"id": "chatcmpl-2", "model": "m", "choices": [],
         "usage": {"prompt_tokens": 80, "completion_tokens": 14, "total_tokens": 94}}]
    reply, seen, records = _captured(tmp_path, body, _upstream(_sse(chunks)))
    assert reply.status_code == 200 and reply.text.endswith("data: [DONE]\n\n")
    assert seen == body
    (record,) = records
    assert dict(record.body) == body
    choice = record.response["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert record.response["usage"]["completion_tokens"] == 14
    message = choice["message"]
    # the streamed call, merged by index, and the reasoning (StreamAccumulator.to_response)
    assert [(c["id"], c["type"], c["function"]["name"], c["function"]["arguments"])
            for c in message["tool_calls"]] == [
        ("call_rome", "function", "get_weather", '{"city": "Rome"}')]
    assert message["content"] is None  # only calls: content null
    assert message["reasoning"] == "Rome next."


def test_redaction_keeps_call_ids_and_what_the_server_is_told(tmp_path) -> None:
    body = _request_with_tools()
    _, seen, (record,) = _captured(
        tmp_path, body, _upstream(_answer_with_call()), redact=True)
    assert seen == body  # the upstream gets the request unredacted
    kept = record.body
    # the personal data in the contents is masked ...
    assert kept["messages"][0]["content"] == "Weather in Paris? Mail it to [EMAIL]"
    assert kept["messages"][2]["content"] == '{"temperature": 18, "contact": "[EMAIL]"}'
    # ... the structure the server answers by is not
    assert kept["messages"][1]["tool_calls"][0]["id"] == CALL_ID
    assert kept["messages"][2]["tool_call_id"] == CALL_ID
    for key in ("tools", "tool_choice", "parallel_tool_calls", "response_format"):
        assert kept[key] == body[key], key


def test_a_chat_message_may_leave_out_its_content_only_to_call_tools() -> None:
    def record(*messages: dict[str, Any]) -> Any:
        return parse_record({"id": "r", "offset_s": 0, "scenario": "s", "endpoint": CHAT,
                             "body": {"messages": list(messages)}}, Path("t.jsonl"), 1)

    user = {"role": "user", "content": "hi"}
    calls = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "f", "arguments": "{}"}}]}
    assert record(user, calls, {"role": "tool", "tool_call_id": "c", "content": "ok"})
    assert record(user, {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}})
    for bad in ({"role": "user"}, {"role": "assistant"}, {"role": "tool", "tool_calls": [1]}):
        with pytest.raises(TrafficError, match=r"body\.messages\[1\]\.content.*missing"):
            record(user, bad)


# --- import-trace ----------------------------------------------------------------------

def _import(tmp_path: Path, tok: str, fmt: str, name: str, **options: Any):
    out = tmp_path / f"{Path(name).stem}.jsonl"
    report = import_trace(TraceImportConfig(format=fmt, source=TRACES / name, out=out,
                                            tokenizer=tok, **options))
    return {r.id: r for r in read_traffic(out).records}, report


def _roles(record) -> list[str]:
    return [m["role"] for m in record.body["messages"]]


def _calls(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message["tool_calls"]]


def _answered(records) -> None:
    """Every request is one an OpenAI server takes: it opens with neither the assistant nor
    a tool result, and each tool message answers a call made before it in the request."""
    for record in records:
        messages = [m for m in record.body["messages"] if m["role"] != "system"]
        assert messages[0]["role"] not in ("assistant", "tool"), record.id
        called: set[str] = set()
        for m in messages:
            called |= {c["id"] for c in m.get("tool_calls") or ()}
            if m["role"] == "tool":
                assert m["tool_call_id"] in called, record.id


def test_glaive_function_call_and_observation_turns(tmp_path, tok) -> None:
    records, report = _import(tmp_path, tok, "sharegpt", "sharegpt_glaive.json")
    assert list(records) == ["sharegpt-1-1", "sharegpt-1-2", "sharegpt-1-3", "sharegpt-1-4",
                             "sharegpt-2-1", "sharegpt-2-2", "sharegpt-3-1"]
    _answered(records.values())
    first, second, third, fourth = (records[f"sharegpt-1-{n}"] for n in (1, 2, 3, 4))
    # the element's system prompt opens every request; its tools list (JSON text of bare
    # functions) is every request's `tools`, in OpenAI's shape
    assert first.body["messages"] == [
        {"role": "system", "content": "You are a helpful assistant with access to the weather."},
        {"role": "user", "content": "What's the weather in Paris right now?"}]
    assert all(r.body["tools"] == [WEATHER] for r in (first, second, third, fourth))
    # the reply that calls a tool is the recorded answer, with its call; no max_tokens
    called = first.response["choices"][0]
    assert called["finish_reason"] == "tool_calls" and called["message"]["content"] is None
    assert _calls(called["message"]) == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert "max_tokens" not in first.body
    # the request sent back with the result: the call (content null) and the tool message
    assert _roles(second) == ["system", "user", "assistant", "tool"]
    call_message, result = second.body["messages"][2:]
    assert call_message == {**called["message"], "role": "assistant"}
    assert result == {"role": "tool", "tool_call_id": call_message["tool_calls"][0]["id"],
                      "content": '{"temperature": 18, "sky": "cloudy"}'}
    text = "It is 18 °C and cloudy in Paris."
    assert second.response["choices"][0]["message"] == {"role": "assistant", "content": text}
    assert second.body["max_tokens"] == tokenizer.count(tok, text)
    # parallel calls: both in one assistant message, each result naming its own call
    parallel = third.response["choices"][0]["message"]
    assert _calls(parallel) == [("get_weather", {"city": "Rome"}),
                                ("get_weather", {"city": "Madrid"})]
    assert _roles(fourth)[-3:] == ["assistant", "tool", "tool"]
    ids = [c["id"] for c in fourth.body["messages"][-3]["tool_calls"]]
    assert [m["tool_call_id"] for m in fourth.body["messages"][-2:]] == ids
    assert len(set(ids)) == 2
    # "tools": "[]" with calls, and a tools list that does not parse: no tools, reported
    assert "tools" not in records["sharegpt-2-1"].body
    assert report.tally.tools_missing == ["sharegpt-2-1", "sharegpt-2-2"]
    assert report.tally.tools_unparsed == ["sharegpt-3-1"]
    assert "tools" not in records["sharegpt-3-1"].body


def test_hermes_tool_call_tags_and_tools_in_the_system_prompt(tmp_path, tok) -> None:
    records, report = _import(tmp_path, tok, "sharegpt", "sharegpt_hermes.jsonl")
    source = [json.loads(line) for line in (TRACES / "sharegpt_hermes.jsonl").open()]
    assert list(records) == ["sharegpt-1-1", "sharegpt-1-2", "sharegpt-2-1", "sharegpt-2-2"]
    _answered(records.values())
    first, second = records["sharegpt-1-1"], records["sharegpt-1-2"]
    # the system prompt is sent as the log has it; its <tools> (Python literals) parse
    system = source[0]["conversations"][0]["value"]
    assert first.body["messages"][0] == {"role": "system", "content": system}
    (tool,) = first.body["tools"]
    assert tool["function"]["name"] == "get_stock_price"
    assert tool["function"]["parameters"]["required"] == ["symbol"]
    message = first.response["choices"][0]["message"]
    assert message["content"] is None
    assert _calls(message) == [("get_stock_price", {"symbol": "AAPL", "realtime": True})]
    # the tool turn's <tool_response> is the tool message, answering that call
    result = second.body["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == message["tool_calls"][0]["id"]
    assert json.loads(result["content"])["content"] == {"symbol": "AAPL", "price": 191.45}
    # a <tool_call> that does not parse stays text, and the report says so
    broken = records["sharegpt-2-1"].response["choices"][0]["message"]
    assert "tool_calls" not in broken and broken["content"].startswith("<tool_call>")
    assert report.tally.calls_unparsed == ["sharegpt-2-1", "sharegpt-2-2"]
    assert report.tally.tools_missing == report.tally.tools_unparsed == []


def test_openai_messages_logs_are_kept_as_they_are(tmp_path, tok) -> None:
    records, report = _import(tmp_path, tok, "sharegpt", "sharegpt_messages.jsonl")
    source = [json.loads(line) for line in (TRACES / "sharegpt_messages.jsonl").open()]
    assert list(records) == ["sharegpt-1-1", "sharegpt-1-2", "sharegpt-2-1", "sharegpt-2-2"]
    _answered(records.values())
    log = source[0]["messages"]
    first, second = records["sharegpt-1-1"], records["sharegpt-1-2"]
    assert first.body == {"messages": log[:2], "tools": source[0]["tools"]}
    assert first.response["choices"][0]["message"] == log[2]  # reasoning_content included
    assert second.body["messages"] == log[:5] and second.body["tools"] == source[0]["tools"]
    assert second.response["choices"][0]["message"] == log[5]
    # an assistant message that only calls: recorded with content null, sent as logged
    later = records["sharegpt-2-2"].body["messages"]
    assert later == source[1]["messages"][:3] and "content" not in later[1]
    assert records["sharegpt-2-1"].response["choices"][0]["message"]["content"] is None
    assert report.tally.tools_missing == ["sharegpt-2-1", "sharegpt-2-2"]


def test_clipping_a_conversation_never_orphans_a_tool_result(tmp_path, tok) -> None:
    for limit in (6, 12, 20, 30):
        records, report = _import(tmp_path / str(limit), tok, "sharegpt",
                                  "sharegpt_glaive.json", max_input_tokens=limit)
        _answered(records.values())
        assert report.tally.clipped or report.tally.left_out


def test_openai_batch_keeps_the_tools_and_the_batch_s_answers(tmp_path, tok) -> None:
    inputs = [json.loads(line) for line in (TRACES / "openai_batch_tools.jsonl").open()]
    outputs = {o["custom_id"]: o for o in map(
        json.loads, (TRACES / "openai_batch_tools_output.jsonl").open())}
    records, report = _import(tmp_path, tok, "openai-batch", "openai_batch_tools.jsonl",
                              responses=TRACES / "openai_batch_tools_output.jsonl")
    assert [(r.id, dict(r.body)) for r in records.values()] == [
        (row["custom_id"], row["body"]) for row in inputs]  # tools, tool_choice, ... as sent
    for rid in ("tools-1", "tools-2", "structured-3"):
        assert records[rid].response == outputs[rid]["response"]["body"]
    message = records["tools-1"].response["choices"][0]["message"]
    assert _calls(message) == [("get_weather", {"city": "Lisbon"})]
    assert records["failed-4"].response is None and records["unanswered-5"].response is None
    assert report.tally.response_failed == ["failed-4"]
    assert report.tally.no_response == ["unanswered-5"]
    assert report.tally.responses_unmatched == ["other-9"]
    saved = json.loads((tmp_path / "openai_batch_tools.import.json").read_text())
    assert saved["config"]["responses"].endswith("openai_batch_tools_output.jsonl")
    # without --responses the bodies are the same and nothing is recorded
    plain, report = _import(tmp_path / "plain", tok, "openai-batch", "openai_batch_tools.jsonl")
    assert [dict(r.body) for r in plain.values()] == [row["body"] for row in inputs]
    assert all(r.response is None for r in plain.values()) and not report.tally.no_response


def test_the_command_takes_responses_and_reports_what_it_kept(tmp_path, tok) -> None:
    runner = CliRunner()
    out = tmp_path / "batch.jsonl"
    done = runner.invoke(main, [
        "import-trace", "--format", "openai-batch", "--tokenizer", tok,
        str(TRACES / "openai_batch_tools.jsonl"), "--out", str(out),
        "--responses", str(TRACES / "openai_batch_tools_output.jsonl")])
    assert done.exit_code == 0, done.output
    assert "1 requests failed in the batch: no recorded response" in done.output
    assert "1 requests have no line in --responses" in done.output
    assert "1 lines of --responses match no request" in done.output
    assert read_traffic(out).records[0].response["choices"][0]["finish_reason"] == "tool_calls"
    glaive = runner.invoke(main, [
        "import-trace", "--format", "sharegpt", "--tokenizer", tok,
        str(TRACES / "sharegpt_glaive.json"), "--out", str(tmp_path / "g.jsonl")])
    assert glaive.exit_code == 0, glaive.output
    assert "2 requests call tools but the log names no tools list" in glaive.output
    assert "1 requests whose log's tools list did not parse" in glaive.output
    other = runner.invoke(main, [
        "import-trace", "--format", "sharegpt", str(TRACES / "sharegpt_glaive.json"),
        "--out", str(tmp_path / "x.jsonl"), "--responses", str(out)])
    assert other.exit_code == 2 and "--responses" in other.output


def test_a_batch_output_file_given_as_the_source_says_what_to_do(tmp_path, tok) -> None:
    with pytest.raises(TraceError, match="output file: pass the input file as SOURCE"):
        _import(tmp_path, tok, "openai-batch", "openai_batch_tools_output.jsonl")
    with pytest.raises(TraceImportConfigError, match="--responses"):
        TraceImportConfig(format="sharegpt", source=TRACES / "sharegpt.json",
                          out=tmp_path / "o.jsonl", responses=tmp_path / "r.jsonl")


@pytest.mark.parametrize(("turns", "where"), [
    ([{"from": "human", "value": "hi"}, {"from": "function_call", "value": "not a call"}],
     "conversations[1].value': a function_call turn must hold a call"),
    ([{"from": "human", "value": "hi"}, {"from": "observation", "value": "{}"}],
     "conversations[1]': a tool result with no tool call before it"),
])
def test_a_malformed_tool_turn_names_its_place(tmp_path, tok, turns, where) -> None:
    source = tmp_path / "bad.json"
    source.write_text(json.dumps([{"conversations": turns}]))
    with pytest.raises(TraceError, match=re.escape(f"bad.json:1: field '{where}")):
        import_trace(TraceImportConfig(format="sharegpt", source=source, out=tmp_path / "o.jsonl",
                                       tokenizer=tok))
    source.write_text(json.dumps({"messages": [
        {"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]}) + "\n")
    with pytest.raises(TraceError, match=r"messages\[1\]\.tool_call_id"):
        import_trace(TraceImportConfig(format="sharegpt", source=source, out=tmp_path / "o.jsonl",
                                       tokenizer=tok))
