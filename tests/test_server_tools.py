"""Tool calls and reasoning over HTTP: the shapes the server sends, streamed and whole, in
the OpenAI wire format of docs/CONTRACTS.md ("Tool calls and reasoning"). Mechanical, so
the engine is scripted: it answers every request with the tokens of a text the test sets
(the real SmolLM2 tokenizer and chat template; no model runs)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from layergate.reference_engine.api import FinishEvent, GenerationRequest, TokenEvent
from layergate.reference_engine.server import ServerSettings, create_app

CHAT = "/v1/chat/completions"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "unit": {"type": "string", "enum": ["C", "F"]}},
        "required": ["city"]}}}
CALLS = '[get_weather(city="Paris", unit="C"), get_weather(city="Rome")]'
THOUGHT = "Here's my thought process: The user wants Paris. Here's my response: "


class ScriptedEngine:
    """A `ServedEngine` that answers with the tokens of `reply`, each with a logprob."""

    model_name = "scripted"
    max_model_len = 2048
    num_layers = 2
    queue_depth = 0
    running = 0

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.reply = ""
        self.prompts: list[str] = []

    def start(self) -> None:
        pass

    def shutdown(self, drain: bool = True) -> None:
        pass

    def cancel(self, request_id: str) -> None:
        pass

    def submit(self, request: GenerationRequest, sink) -> None:
        self.prompts.append(self.tokenizer.decode(list(request.prompt_token_ids)))
        ids = self.tokenizer(self.reply, add_special_tokens=False)["input_ids"]
        ids = ids[:request.params.max_tokens]
        sent = ""
        for n, token in enumerate(ids, start=1):
            text = self.tokenizer.decode(ids[:n])
            sink(TokenEvent(token, text[len(sent):], -0.25,
                            {"x": -1.0} if request.params.top_logprobs else None))
            sent = text
        reason = "length" if len(ids) == request.params.max_tokens else "stop"
        sink(FinishEvent(reason, len(request.prompt_token_ids), len(ids),
                         {"policy": "full", "token_ids": list(ids)}))


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from layergate.reference_engine.loading import ensure_converted

    return AutoTokenizer.from_pretrained(ensure_converted())


def serve(tokenizer, **settings):
    engine = ScriptedEngine(tokenizer)
    return engine, TestClient(create_app(engine, CollectorRegistry(), ServerSettings(**settings)))


@pytest.fixture(scope="module")
def server(tokenizer):
    engine, client = serve(tokenizer)
    with client:
        yield engine, client


def body(text: str = "Weather in Paris and Rome?", **extra) -> dict:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": 64,
            "temperature": 0, **extra}


def whole(client, payload: dict) -> dict:
    r = client.post(CHAT, json=payload)
    assert r.status_code == 200, r.text
    return r.json()


def chunks(client, payload: dict) -> list[dict]:
    out = []
    with client.stream("POST", CHAT, json={**payload, "stream": True}) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append(json.loads(line[len("data: "):]))
    return out


def deltas(stream: list[dict]) -> list[dict]:
    return [c["choices"][0]["delta"] for c in stream if c["choices"]]


def test_whole_answer_is_tool_calls_with_null_content(server):
    engine, client = server
    engine.reply = CALLS
    answer = whole(client, body(tools=[WEATHER]))
    [choice] = answer["choices"]
    assert choice["finish_reason"] == "tool_calls"
    message = choice["message"]
    assert message["role"] == "assistant" and message["content"] is None
    assert "reasoning" not in message  # not asked for
    calls = message["tool_calls"]
    assert [(c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in calls] == [("function", "get_weather", {"city": "Paris", "unit": "C"}),
                                ("function", "get_weather", {"city": "Rome"})]
    assert calls[0]["function"]["arguments"] == '{"city": "Paris", "unit": "C"}'
    assert all(c["id"].startswith("call_") for c in calls) and calls[0]["id"] != calls[1]["id"]
    # the extension is intact: every generated token, whichever part it landed in
    assert len(answer["layergate"]["token_ids"]) == answer["usage"]["completion_tokens"]
    # the same prompt names its calls alike (replays, arms)
    assert [c["id"] for c in whole(client, body(tools=[WEATHER]))["choices"][0]["message"][
        "tool_calls"]] == [c["id"] for c in calls]
    other = whole(client, body("Weather in Oslo?", tools=[WEATHER]))
    assert other["choices"][0]["message"]["tool_calls"][0]["id"] != calls[0]["id"]


def test_streamed_tool_calls_in_the_openai_shape(server):
    engine, client = server
    engine.reply = CALLS
    payload = body(tools=[WEATHER], logprobs=True, top_logprobs=1)
    reference = whole(client, payload)
    stream = chunks(client, payload)
    assert stream[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    final = stream[-1]
    assert final["choices"][0]["finish_reason"] == "tool_calls"
    assert final["layergate"]["token_ids"] == reference["layergate"]["token_ids"]
    assert final["usage"] == reference["usage"]
    parts = [d for d in deltas(stream)[1:] if d]
    assert all(set(d) == {"tool_calls"} for d in parts), parts  # no content at all
    entries = [e for d in parts for e in d["tool_calls"]]
    assert all(len(d["tool_calls"]) == 1 for d in parts)
    for index, expected in enumerate(reference["choices"][0]["message"]["tool_calls"]):
        mine = [e for e in entries if e["index"] == index]
        first, rest = mine[0], mine[1:]
        # the first delta names the call, with empty arguments; then fragments only
        assert first == {"index": index, "id": expected["id"], "type": "function",
                         "function": {"name": expected["function"]["name"], "arguments": ""}}
        assert len(rest) >= 2 and all(set(e) == {"index", "function"} and
                                      set(e["function"]) == {"arguments"} for e in rest)
        assert "".join(e["function"]["arguments"] for e in rest) == \
            expected["function"]["arguments"]
    # each token's logprob went out once, held or not
    held = [lp for c in stream for lp in ((c["choices"][0].get("logprobs") or {})
                                          .get("content") or [])]
    assert len(held) == reference["usage"]["completion_tokens"]


def test_text_that_is_not_a_call_streams_as_content(server):
    engine, client = server
    for reply in ("[The answer] is four.", "[get_weather(city=\"Paris\")] is what I'd call.",
                  "Sunny in Paris."):
        engine.reply = reply
        reference = whole(client, body(tools=[WEATHER]))
        assert reference["choices"][0]["message"]["content"] == reply
        assert "tool_calls" not in reference["choices"][0]["message"]
        assert reference["choices"][0]["finish_reason"] == "stop"
        stream = chunks(client, body(tools=[WEATHER]))
        assert "".join(d.get("content", "") for d in deltas(stream)) == reply
        assert not any("tool_calls" in d for d in deltas(stream))
        assert stream[-1]["choices"][0]["finish_reason"] == "stop"


def test_no_tools_or_tool_choice_none_leaves_a_list_as_content(server):
    engine, client = server
    engine.reply = CALLS
    for payload in (body(), body(tools=[WEATHER], tool_choice="none")):
        message = whole(client, payload)["choices"][0]["message"]
        assert message == {"role": "assistant", "content": CALLS}
        stream = chunks(client, payload)
        # not parsed: one chunk per token, as always
        assert len(stream) - 2 == stream[-1]["usage"]["completion_tokens"]


@pytest.mark.parametrize("how", ["request", "server"])
def test_reasoning_streams_before_the_content(tokenizer, how):
    settings = {"reasoning_parser": "granite"} if how == "server" else {}
    extra = {"chat_template_kwargs": {"thinking": True}} if how == "request" else {}
    engine, client = serve(tokenizer, **settings)
    with client:
        engine.reply = THOUGHT + "It is sunny."
        message = whole(client, body(**extra))["choices"][0]["message"]
        assert message == {"role": "assistant", "content": "It is sunny.",
                           "reasoning": "The user wants Paris."}
        stream = deltas(chunks(client, body(**extra)))[1:]
        kinds = [k for d in stream for k in d if k in ("reasoning", "content") and d[k]]
        assert kinds == sorted(kinds, key=["reasoning", "content"].index)  # reasoning first
        assert "".join(d.get("reasoning", "") for d in stream) == "The user wants Paris."
        assert "".join(d.get("content", "") for d in stream) == "It is sunny."
        # with tools as well: the content after the reasoning is read for calls
        engine.reply = THOUGHT + '[get_weather(city="Paris")]'
        answer = whole(client, body(tools=[WEATHER], **extra))["choices"][0]
        assert answer["finish_reason"] == "tool_calls"
        assert answer["message"]["reasoning"] == "The user wants Paris."
        assert answer["message"]["content"] is None
        stream = chunks(client, body(tools=[WEATHER], **extra))
        assert stream[-1]["choices"][0]["finish_reason"] == "tool_calls"
        assert [e["function"]["name"] for d in deltas(stream) for e in d.get("tool_calls", [])
                if "name" in e.get("function", {})] == ["get_weather"]
        # an output without the markers: content, and reasoning null
        engine.reply = "It is sunny."
        message = whole(client, body(**extra))["choices"][0]["message"]
        assert message == {"role": "assistant", "content": "It is sunny.", "reasoning": None}


def test_reasoning_is_not_split_unless_asked(server):
    engine, client = server
    engine.reply = THOUGHT + "It is sunny."
    for extra in ({}, {"chat_template_kwargs": {"thinking": False}}):
        message = whole(client, body(**extra))["choices"][0]["message"]
        assert message == {"role": "assistant", "content": THOUGHT + "It is sunny."}


def test_tool_turns_reach_the_prompt(server):
    engine, client = server
    engine.reply = "It is 21 degrees in Paris."
    whole(client, {"messages": [
        {"role": "system", "content": "Call get_weather(city) as [get_weather(city=...)]."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'}],
        "tools": [WEATHER], "max_tokens": 8})
    prompt = engine.prompts[-1]
    assert '<|im_start|>assistant\n[get_weather(city="Paris")]<|im_end|>' in prompt
    assert '<|im_start|>tool\n{"temp": 21}<|im_end|>' in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize("extra,param", [
    ({"tools": [WEATHER], "tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function",
                                          "function": {"name": "get_weather"}}}, "tool_choice"),
    ({"tool_choice": "auto"}, "tool_choice"),
    ({"chat_template_kwargs": {"tokenize": True}}, "chat_template_kwargs"),
    ({"chat_template_kwargs": {"add_generation_prompt": False}}, "chat_template_kwargs"),
])
def test_what_cannot_be_honoured_is_refused(server, extra, param):
    _, client = server
    r = client.post(CHAT, json=body(**extra))
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_response_format_is_accepted(server):
    engine, client = server
    engine.reply = '{"name": "Anna"}'
    for fmt in ({"type": "json_object"}, {"type": "text"},
                {"type": "json_schema", "json_schema": {"name": "p", "strict": True,
                                                        "schema": {"type": "object"}}}):
        message = whole(client, body(response_format=fmt))["choices"][0]["message"]
        assert message["content"] == '{"name": "Anna"}'
