"""The engine's reading of its model's text into an answer's parts, with no model: pythonic
tool calls as vLLM's `pythonic` parser reads them, granite's reasoning markers, and the one
parser behind both, which must split a stream exactly as it splits the whole output. Also
the request schema's tool fields and how tool turns reach the prompt."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from layergate.reference_engine.server.answer import AnswerOptions, AnswerParser
from layergate.reference_engine.server.prompts import message_text
from layergate.reference_engine.server.reasoning import CONTENT, REASONING, GraniteSplitter
from layergate.reference_engine.server.schemas import ChatCompletionRequest, ChatMessage
from layergate.reference_engine.server.tool_parser import (
    ParsedCall,
    argument_fragments,
    could_be_calls,
    parse_calls,
    pythonic,
)


def args(text: str) -> list[tuple[str, dict]]:
    calls = parse_calls(text)
    assert calls is not None, text
    return [(c.name, json.loads(c.arguments)) for c in calls]


def test_a_list_of_calls_is_read_with_json_arguments():
    assert parse_calls('[get_weather(city="Paris", unit="C")]') == [
        ParsedCall("get_weather", '{"city": "Paris", "unit": "C"}')]
    assert args('[get_weather(city="Paris"), get_time(zone="CET", dst=True)]') == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"zone": "CET", "dst": True})]
    assert args("[ping()]") == [("ping", {})]
    # what the first call closes with: a newline, trailing whitespace
    assert args('[f(a=1),\n g(b="x")]\n') == [("f", {"a": 1}), ("g", {"b": "x"})]
    # non-ASCII stays as it is (ensure_ascii=False, as vLLM)
    assert parse_calls('[f(city="Zürich")]')[0].arguments == '{"city": "Zürich"}'


def test_nested_and_lenient_literals_as_vllm_0_32():
    assert args('[f(x={"a": [1, 2.5, None, True]}, y=[{"k": "v"}], z=-3, w=+2)]') == [
        ("f", {"x": {"a": [1, 2.5, None, True]}, "y": [{"k": "v"}], "z": -3, "w": 2})]
    # JSON spellings, tuples and sets as lists, an f-string without placeholders
    assert args('[f(a=null, b=true, c=false, d=(1, 2), e={3}, g=f"hi")]') == [
        ("f", {"a": None, "b": True, "c": False, "d": [1, 2], "e": [3], "g": "hi"})]
    assert args("[f(x=1), tools.search(q='a')]") == [("f", {"x": 1}), ("tools.search",
                                                                       {"q": "a"})]
    assert args("[f(x=1, x=2)]") == [("f", {"x": 2})]  # `ast` keeps both; the last wins


@pytest.mark.parametrize("text", [
    "The weather is fine.",
    "",
    "[1, 2, 3]",                         # a list, not of calls
    "[The answer] is 4",
    ' [f(x=1)]',                          # leading text: the pattern is anchored at the start
    "Sure: [f(x=1)]",
    "[f(x=1)] and some words after it",   # the output is more than the list
    "[f(1)]",                            # positional arguments: vLLM's pattern refuses them
    "[f(x=g(1))]",                       # not a literal
    "[f(x=y)]",                          # a name, not a literal
    '[f(x=b"raw")]',                     # bytes have no JSON form
    "[f(**{'a': 1})]",                   # no name to give the value
    "[f(x=1)",                           # never closed
    "[f(x=-y)]",
    "[f(x=1e999)]",                      # infinite: no JSON number
    '[f(x="\\ud800")]',                  # a lone surrogate: no UTF-8 text
])
def test_everything_else_is_content(text):
    assert parse_calls(text) is None
    answer = AnswerParser(AnswerOptions(tools=True)).whole(text)
    assert answer.tool_calls == [] and answer.content == text and answer.reasoning is None


def test_could_be_calls_says_no_only_when_no_continuation_can_match():
    for prefix in ("", "[", "[get", "[get_weather(", '[get_weather(city="Pa',
                   '[f(x=1), g(', '[f(x=1)]'):
        assert could_be_calls(prefix), prefix
    for prefix in ("[The ", "[1", "Hello", "[ f(", "[f(x=1)] and"):
        # (the last one matches the pattern: what decides it is `ast`, at the end)
        assert could_be_calls(prefix) == (prefix == "[f(x=1)] and"), prefix


def test_argument_fragments_join_to_the_arguments():
    text = '{"city": "Paris", "unit": "C", "days": [1, 2], "opts": {"a": null}}'
    fragments = argument_fragments(text)
    assert fragments[:3] == ['{"city": ', '"Paris"', ', "unit": ']
    assert "".join(fragments) == text
    assert argument_fragments("{}") == ["{}"]
    assert argument_fragments("not json") == ["not json"]


def test_pythonic_writes_a_call_the_parser_reads_back():
    arguments = {"city": "Zürich", "n": 3, "x": 2.5, "ok": False, "none": None,
                 "list": [1, "a", True], "obj": {"k": [None]}, "quote": 'say "hi"\n'}
    text = pythonic("lookup", json.dumps(arguments))
    assert text.startswith('lookup(city="Zürich", n=3, ')
    assert args(f"[{text}]") == [("lookup", arguments)]
    assert pythonic("ping", "") == "ping()"


def split(text: str, step: int) -> list[tuple[str, str]]:
    splitter = GraniteSplitter()
    pieces = []
    for i in range(0, len(text), step):
        pieces += splitter.feed(text[i:i + step])
    return pieces + splitter.finish()


def joined(pieces: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    kinds = {k for k, _ in pieces}
    return ("".join(t for k, t in pieces if k == REASONING) if REASONING in kinds else None,
            "".join(t for k, t in pieces if k == CONTENT) if CONTENT in kinds else None)


@pytest.mark.parametrize("text,reasoning,content", [
    ("Here's my thought process: 17 is odd. Here's my response: No.", "17 is odd.", "No."),
    ("Here is my thought process:\nA.\n\nHere is my response:\n\nB", "A.", "B"),
    ("Here's my thought process: mixed. Here is my response: ok", "mixed.", "ok"),
    # no response marker: all reasoning (vLLM's streaming rule)
    ("Here's my thought process: thinking aloud", "thinking aloud", None),
    # not opening with the marker: all content, even if a marker comes later
    ("Sure. Here's my thought process: x Here's my response: y",
     None, "Sure. Here's my thought process: x Here's my response: y"),
    ("Here's my response: No.", None, "Here's my response: No."),
    ("Here's my", None, "Here's my"),
    # a near miss of the response marker stays reasoning, whole
    ("Here's my thought process: Here's my respo and Here is more. Here's my response: z",
     "Here's my respo and Here is more.", "z"),
])
def test_granite_markers_split_alike_streamed_and_whole(text, reasoning, content):
    whole = joined(split(text, len(text) or 1))
    assert whole == (reasoning, content)
    for step in (1, 2, 3, 7):  # every way of cutting it into deltas gives the same parts
        assert joined(split(text, step)) == whole, step


@pytest.mark.parametrize("text,options", [
    ('[get_weather(city="Paris", unit="C"), get_time(zone="CET")]', {"tools": True}),
    ("[Not a call] at all", {"tools": True}),
    ("[f(x=1)] trailing", {"tools": True}),
    ("Here's my thought process: weather. Here's my response: [get_weather(city=\"Rome\")]",
     {"tools": True, "reasoning": "granite"}),
    ("Here's my thought process: hm. Here's my response: plain words", {"tools": True,
                                                                          "reasoning": "granite"}),
    ("Here's my thought process: only this", {"reasoning": "granite"}),
    ('[f(x=1)]', {"reasoning": "granite"}),  # no tools asked: a list is content
])
def test_a_stream_gives_the_whole_answer(text, options):
    whole = AnswerParser(AnswerOptions(**options)).whole(text)
    for step in (1, 4):
        parser = AnswerParser(AnswerOptions(**options))
        pieces = []
        for i in range(0, len(text), step):
            pieces += parser.feed(text[i:i + step])
        rest, calls = parser.finish()
        reasoning, content = joined(pieces + rest)
        assert calls == whole.tool_calls
        assert reasoning == whole.reasoning
        assert (content or "") == (whole.content or "")


def test_answer_parts():
    tools = AnswerParser(AnswerOptions(tools=True)).whole('[f(x=1)]')
    assert tools.content is None and tools.reasoning is None
    assert tools.tool_calls == [ParsedCall("f", '{"x": 1}')]
    both = AnswerParser(AnswerOptions(tools=True, reasoning="granite")).whole(
        "Here's my thought process: a Here's my response: [f(x=1)]")
    assert (both.reasoning, both.content, len(both.tool_calls)) == ("a", None, 1)
    only = AnswerParser(AnswerOptions(reasoning="granite")).whole(
        "Here's my thought process: a")
    assert (only.reasoning, only.content) == ("a", None)


def test_held_text_is_released_once_it_cannot_be_a_call():
    parser = AnswerParser(AnswerOptions(tools=True))
    assert parser.feed("[") == [] and parser.feed("The") == []
    assert parser.feed(" end") == [(CONTENT, "[The end")]
    assert parser.feed(".") == [(CONTENT, ".")]
    assert parser.finish() == ([], [])
    plain = AnswerParser(AnswerOptions(tools=True))
    assert plain.feed("Hello") == [(CONTENT, "Hello")]  # not "[": never held


def test_call_ids_are_deterministic_per_prompt():
    a, b = AnswerOptions(tools=True, call_id_seed=b"1,2,3"), AnswerOptions(tools=True,
                                                                          call_id_seed=b"1,2,4")
    assert a.call_id(0) == AnswerOptions(tools=True, call_id_seed=b"1,2,3").call_id(0)
    assert len({a.call_id(0), a.call_id(1), b.call_id(0)}) == 3
    assert a.call_id(0).startswith("call_") and len(a.call_id(0)) == len("call_") + 24


TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def test_the_request_schema_takes_tool_conversations():
    body = ChatCompletionRequest.model_validate({
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
            {"role": "user", "content": "And Rome?"}],
        "tools": [TOOL], "tool_choice": "auto", "parallel_tool_calls": False,
        "response_format": {"type": "json_schema",
                            "json_schema": {"name": "w", "schema": {"type": "object"}}},
        "chat_template_kwargs": {"thinking": True}})
    assert body.tools[0].function.name == "get_weather"
    assert body.response_format.json_schema.schema_ == {"type": "object"}
    assert message_text(body.messages[1]) == '[get_weather(city="Paris")]'
    assert message_text(body.messages[2]) == '{"temp": 21}'
    both = ChatMessage.model_validate({"role": "assistant", "content": "Let me look.",
                                       "tool_calls": body.messages[1].tool_calls})
    assert message_text(both) == 'Let me look.\n[get_weather(city="Paris")]'


@pytest.mark.parametrize("message", [
    {"role": "user", "content": None},
    {"role": "assistant", "content": None},
    {"role": "tool", "content": "42"},                        # which call does it answer?
    {"role": "user", "content": "x", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
])
def test_malformed_tool_messages_are_refused(message):
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate({"messages": [message]})


@pytest.mark.parametrize("field", [
    {"tools": [{"type": "function", "function": {"name": "bad name!"}}]},
    {"tools": [{"type": "retrieval"}]},
    {"tool_choice": "sometimes"},
    {"response_format": {"type": "json_schema"}},
    {"response_format": {"type": "yaml"}},
    {"chat_template_kwargs": "thinking"},
])
def test_malformed_tool_fields_are_refused(field):
    with pytest.raises(ValidationError):
        ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}],
                                              **field})


PIECES = ["[", "]", "(", ")", "=", ",", " ", "\n", '"', "'", "f", "get_weather", "city",
          "x=1", '"Paris"', "{", "}", ":", "-", "null", "Here's my thought process:",
          "Here is my response:", "Here", "'s my", " response", "word", "é", ".", "1.5"]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(parts=st.lists(st.sampled_from(PIECES), max_size=30), cuts=st.integers(1, 6),
       tools=st.booleans(), reasoning=st.booleans())
def test_any_output_streams_as_it_answers_whole(parts, cuts, tools, reasoning):
    """Whatever the model writes and however it is cut into deltas: the stream's parts are
    the whole answer's, and no text is lost or invented."""
    text = "".join(parts)
    options = AnswerOptions(tools=tools, reasoning="granite" if reasoning else None)
    whole = AnswerParser(options).whole(text)
    parser = AnswerParser(options)
    pieces = []
    for i in range(0, len(text), cuts):
        pieces += parser.feed(text[i:i + cuts])
    rest, calls = parser.finish()
    streamed_reasoning, streamed_content = joined(pieces + rest)
    assert calls == whole.tool_calls
    assert streamed_reasoning == whole.reasoning
    assert (streamed_content or "") == (whole.content or "")
    if not reasoning and not calls:
        assert whole.content == text  # nothing to split off: every character is content
