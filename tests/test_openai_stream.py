"""The stream accumulator and result building, fed with the streams of real servers
(tests/fixtures/streams/: vLLM, TGI, llama.cpp, layergate; each file says where its shape
comes from) and with the ways a stream goes wrong. No I/O."""

from __future__ import annotations

import json

import pytest

from exporters.traffic import TrafficRecord
from harness.replay.openai_stream import (
    ResultBuilder,
    StreamAccumulator,
    StreamError,
    error_message,
    streaming_body,
)
from tests.support.stream_server import FIXTURES

RECORD = TrafficRecord("r1", 0.0, "short", "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})


def feed(text: str) -> StreamAccumulator:
    """Every line, the i-th arriving at time i seconds."""
    acc = StreamAccumulator()
    for i, line in enumerate(text.splitlines()):
        acc.feed_line(line, float(i))
    return acc


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def result_of(text: str, e2e: float = 100.0):
    return ResultBuilder(RECORD, "candidate", intended=0.0).finished(200, feed(text), e2e)


# file -> (text, output tokens, prompt tokens, finish reason, content chunks)
GOOD = {
    "vllm_chat.txt": ("Paris is lovely", 3, 41, "length", 3),
    "vllm_chat_speculative.txt": ("Paris is the capital of France.", 7, 12, "stop", 3),
    "tgi_chat.txt": ("OK!", 3, 39, "stop", 2),
    "llamacpp_chat.txt": ("Blue.", 3, 31, "stop", 2),
    "layergate_chat.txt": ("The colour is a", 4, 34, "length", 4),
    "layergate_completions.txt": (" Paris.\n", 3, 5, "length", 3),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_each_server_s_stream_becomes_a_result(name: str) -> None:
    text, tokens, prompt, finish, chunks = GOOD[name]
    acc = feed(fixture(name))
    assert acc.done and acc.output_text == text and len(acc.chunk_times) == chunks
    result = result_of(fixture(name))
    assert result.ok, result.error
    assert (result.output_text, result.output_tokens, result.prompt_tokens,
            result.finish_reason) == (text, tokens, prompt, finish)
    # TTFT is the first chunk with content (not the role chunk); ITL the gaps after it
    assert result.ttft_s == acc.chunk_times[0] > 0
    assert len(result.itl_s) == chunks - 1 and all(gap > 0 for gap in result.itl_s)
    assert result.max_tokens == 8 and result.request_id == "r1"


def test_several_tokens_in_one_chunk_take_the_count_from_usage() -> None:
    result = result_of(fixture("vllm_chat_speculative.txt"), e2e=9.0)
    assert result.output_tokens == 7  # 3 chunks, 7 tokens
    assert result.tpot_s == pytest.approx((9.0 - result.ttft_s) / 6)


def test_layergate_extension_token_ids_and_logprobs() -> None:
    result = result_of(fixture("layergate_chat.txt"))
    assert result.token_ids == (504, 7302, 314, 253)
    assert result.extension["policy"] == "full" and result.extension["layers_total"] == 30
    assert len(result.logprobs) == len(result.top_logprobs) == 4
    assert all(len(top) == 2 for top in result.top_logprobs)
    assert result.logprobs[0] == pytest.approx(-1.7595415115356445)


def test_foreign_streams_carry_no_token_ids() -> None:
    for name in ("vllm_chat.txt", "tgi_chat.txt", "llamacpp_chat.txt"):
        result = result_of(fixture(name))
        assert result.token_ids is None and result.extension == {}


@pytest.mark.parametrize(("name", "message"), [
    ("vllm_error.txt", "error in stream: Internal server error"),
    ("tgi_error.txt", "error in stream: Request failed during generation"),
    ("vllm_chat_n2.txt", "a second choice (index 1)"),
])
def test_a_stream_that_would_give_wrong_figures_raises(name: str, message: str) -> None:
    with pytest.raises(StreamError, match=message.replace("(", r"\(").replace(")", r"\)")):
        feed(fixture(name))


def _chunk(**choice: object) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, **choice}]})


@pytest.mark.parametrize(("lines", "message"), [
    (["data: {not json"], "invalid JSON in stream"),
    (["data: [1, 2]"], "stream chunk is not an object"),
    (['data: {"choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": '
      '{"content": [{"token": "x"}]}}]}'], "unexpected chunk shape"),
    (['data: {"choices": "x"}'], "unexpected chunk shape"),
    (['data: {"object": "error", "message": "model not found"}'],
     "error in stream: model not found"),
])
def test_malformed_chunks_raise_naming_the_problem(lines: list[str], message: str) -> None:
    with pytest.raises(StreamError, match=message):
        feed("\n".join(lines))


def test_no_done_is_fine_when_the_stream_said_why_it_ended() -> None:
    text = fixture("vllm_chat.txt").replace("data: [DONE]", "")
    result = result_of(text)
    assert result.ok and result.output_text == "Paris is lovely"


@pytest.mark.parametrize(("text", "message"), [
    (_chunk(delta={"content": "x"}) + "\ndata: [DONE]", "stream ended without a finish_reason"),
    (_chunk(delta={"content": "x"}), "no [DONE]: the connection closed early"),
    ('{"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}',
     "held no SSE `data:` line"),
    ("", "held no SSE `data:` line"),
])
def test_an_unfinished_stream_is_a_failed_result(text: str, message: str) -> None:
    result = result_of(text)
    assert not result.ok and message in result.error
    assert result.e2e_s is not None and result.http_status == 200


def test_comments_and_other_sse_fields_are_ignored() -> None:
    text = "\n".join([": ping", "event: message", "id: 7", "retry: 100",
                      _chunk(delta={"content": "a"}, finish_reason="stop"), "", "data:[DONE]"])
    result = result_of(text)
    assert result.ok and result.output_text == "a" and result.output_tokens == 1


@pytest.mark.parametrize(("body", "status", "expected"), [
    (b'{"error":{"message":"n=2 is not supported: one choice per request",'
     b'"type":"invalid_request_error","param":"n","code":"unsupported_value"}}', 400,
     "HTTP 400: n=2 is not supported: one choice per request"),  # layergate, OpenAI, vLLM
    (b'{"error":"Input validation error: `max_new_tokens` must be > 0",'
     b'"error_type":"validation"}', 422,
     "HTTP 422: Input validation error: `max_new_tokens` must be > 0"),  # TGI
    (b'{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError",'
     b'"param":null,"code":404}', 404, "HTTP 404: The model `x` does not exist."),  # old vLLM
    (b'{"detail":"Not Found"}', 404, "HTTP 404: Not Found"),  # FastAPI
    (b"Internal Server Error", 500, "HTTP 500: Internal Server Error"),
    (b"<html>" + b"x" * 1000, 502, "HTTP 502: <html>" + "x" * 294),
])
def test_error_bodies_give_their_message(body: bytes, status: int, expected: str) -> None:
    assert error_message(body, status) == expected


def test_the_body_asks_for_a_stream_with_usage_and_keeps_the_record() -> None:
    record = TrafficRecord("r", 0.0, "s", "/v1/chat/completions",
                           {"messages": [], "stream_options": {"x": 1}, "model": "a"})
    body = streaming_body(record, "b")
    assert body["stream"] is True and body["model"] == "b"
    assert body["stream_options"] == {"x": 1, "include_usage": True}
    assert record.body == {"messages": [], "stream_options": {"x": 1}, "model": "a"}
