"""The stream accumulator and result building, fed with the streams of real servers
(tests/fixtures/streams/: vLLM, TGI, SGLang, llama.cpp's llama-server and llama-cpp-python,
layergate; each file says where its shape comes from) and with the ways a stream goes
wrong: what each answer counts as tokens, and the quirks it records. No I/O."""

from __future__ import annotations

import dataclasses
import json

import pytest

from layergate.exporters.catalogue import (
    CHARACTERS,
    ERROR_IN_STREAM,
    LOGPROBS,
    NO_DONE,
    NO_LOGPROBS,
    NO_USAGE,
    QUIRKS,
    SEVERAL_CHOICES,
    SEVERAL_TOKENS_PER_CHUNK,
    SPEC_ACCEPT_LENGTH,
    TOKEN_SOURCES,
    TOKENIZER,
    USAGE,
)
from layergate.exporters.figures import speculative
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.openai_stream import (
    BodyShape,
    ResultBuilder,
    StreamAccumulator,
    StreamError,
    added_fields,
    error_message,
    reported_numbers,
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


ASKED = streaming_body(RECORD, BodyShape(top_logprobs=2))  # what the replay sends


def result_of(text: str, e2e: float = 100.0, tokenizer: str | None = None,
              body: dict | None = None):
    build = ResultBuilder(RECORD, "candidate", intended=0.0, body=body, tokenizer=tokenizer)
    return build.finished(200, feed(text), e2e)


# file -> (text, output tokens, prompt tokens, finish reason, content chunks, counted from)
GOOD = {
    "vllm_chat.txt": ("Paris is lovely", 3, 41, "length", 3, USAGE),
    "vllm_chat_speculative.txt": ("Paris is the capital of France.", 7, 12, "stop", 3, USAGE),
    "tgi_chat.txt": ("OK!", 3, 39, "stop", 2, USAGE),
    "sglang_chat.txt": ("Red.", 3, 42, "stop", 2, USAGE),
    "sglang_0.5.23_chat_reported.txt": ("Red is red. Red is red.", 9, 40, "stop", 7, USAGE),
    "llamacpp_chat.txt": ("Blue.", 3, 31, "stop", 2, USAGE),
    "llamacpp_python_chat.txt": ("The colour I'm", 4, 0, "length", 4, LOGPROBS),
    "layergate_chat.txt": ("The colour is a", 4, 34, "length", 4, USAGE),
    "layergate_completions.txt": (" Paris.\n", 3, 5, "length", 3, USAGE),
}
# file -> the quirks its stream shows when the replay asked for usage and 2 logprobs
QUIRKS_SEEN = {
    "vllm_chat.txt": {NO_LOGPROBS},
    "vllm_chat_speculative.txt": {NO_LOGPROBS, SEVERAL_TOKENS_PER_CHUNK},
    "tgi_chat.txt": {NO_LOGPROBS},  # its empty end-of-sequence chunk is one token: no quirk
    "sglang_chat.txt": {NO_LOGPROBS},
    "sglang_0.5.23_chat_reported.txt": {NO_LOGPROBS, SEVERAL_TOKENS_PER_CHUNK},
    "llamacpp_chat.txt": {NO_LOGPROBS},
    "llamacpp_python_chat.txt": {NO_USAGE},
    "layergate_chat.txt": set(),
    "layergate_completions.txt": {NO_LOGPROBS},
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_each_server_s_stream_becomes_a_result(name: str) -> None:
    text, tokens, prompt, finish, chunks, source = GOOD[name]
    acc = feed(fixture(name))
    assert acc.done and acc.output_text == text and len(acc.chunk_times) == chunks
    result = result_of(fixture(name), body=ASKED)
    assert result.ok, result.error
    assert (result.output_text, result.output_tokens, result.prompt_tokens,
            result.finish_reason, result.tokens_from) == (text, tokens, prompt, finish, source)
    assert set(result.quirks) == QUIRKS_SEEN[name] and set(result.quirks) <= set(QUIRKS)
    # TTFT is the first chunk with content (not the role chunk); ITL the gaps after it
    assert result.ttft_s == acc.chunk_times[0] > 0
    assert len(result.itl_s) == chunks - 1 and all(gap > 0 for gap in result.itl_s)
    assert result.max_tokens == 8 and result.request_id == "r1"


def test_several_tokens_in_one_chunk_take_the_count_from_usage() -> None:
    result = result_of(fixture("vllm_chat_speculative.txt"), e2e=9.0)
    assert result.output_tokens == 7  # 3 chunks, 7 tokens
    assert result.tpot_s == pytest.approx((9.0 - result.ttft_s) / 6)
    # ITL is the gap between chunks (vLLM's benchmark defines it so): 2 gaps, not 6
    assert len(result.itl_s) == 2 and SEVERAL_TOKENS_PER_CHUNK in result.quirks


def spec_accept_length_of(result) -> float:
    """`spec_accept_length` as the figures compute it from one answer's reported counts."""
    stat = speculative.stats("candidate")[SPEC_ACCEPT_LENGTH]
    accepted, drafts = (result.per_request(k) for k in ("draft_tokens_accepted", "draft_steps"))
    return float(stat.fn(accepted, drafts))


def test_per_request_numbers_outside_the_extension_are_read_under_its_names() -> None:
    """vLLM 0.32 (recorded from `vllm serve --enable-prompt-tokens-details
    --speculative-config '{"method": "ngram", ...}' --per-request-spec-decode-metrics
    summary`, the prompt's first block cached by an earlier request): its usage's cached
    tokens and its per-request speculative metrics become the numbers the figures read."""
    result = result_of(fixture("vllm_0.32_chat_reported.txt"), body=ASKED)
    assert result.ok and result.extension == {} and result.tokens_from == USAGE
    assert result.reported == {"prefix_cache_hit_tokens": 128,
                               "prefix_cache_query_tokens": 247, "draft_tokens_proposed": 15,
                               "draft_tokens_accepted": 9, "draft_steps": 5}
    # vLLM's own figure for this answer (2.8) is the one the figures compute from its counts
    assert spec_accept_length_of(result) == pytest.approx(2.8)
    assert result.per_request("draft_steps") == 5
    # the engine's extension, where it has a number, is read first
    ours = dataclasses.replace(result, extension={"draft_steps": 4})
    assert ours.per_request("draft_steps") == 4 and ours.per_request("draft_tokens_accepted") == 9


def test_sglang_s_per_request_numbers_are_read_under_the_extension_s_names() -> None:
    """SGLang 0.5.23 (its own response classes; the fixture says how): the usage's cached
    tokens (--enable-cache-report) and `sglext.spec_tokens_details` (asked per request)."""
    result = result_of(fixture("sglang_0.5.23_chat_reported.txt"), body=ASKED)
    assert result.ok and result.tokens_from == USAGE
    assert result.reported == {"prefix_cache_hit_tokens": 32,
                               "prefix_cache_query_tokens": 40, "draft_tokens_proposed": 12,
                               "draft_tokens_accepted": 5, "draft_steps": 4}
    # SGLang's own accept length (completion tokens / verify calls: 9 / 4) is ours here
    assert spec_accept_length_of(result) == pytest.approx(9 / 4)
    assert reported_numbers(None, None, {"spec_tokens_details": [{"spec_verify_ct": 4}]}) == {}


@pytest.mark.parametrize("usage, metrics", [
    ({"prompt_tokens": 10}, None),  # no details: nothing
    ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": None}}, None),
    ({"prompt_tokens_details": {"cached_tokens": 3}}, None),  # no prompt count to divide by
    ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": True}}, None),
    (None, {"speculative_decoding": None}), (None, {"time_to_first_token_ms": 3.0}),
])
def test_a_missing_or_malformed_number_is_left_out_never_read_as_zero(usage, metrics) -> None:
    assert reported_numbers(usage, metrics) == {}


def test_without_usage_the_count_comes_from_logprobs_then_tokenizer_then_characters(
        tmp_path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    # a word-level tokenizer written here: "Paris", " is", " lovely" are three tokens
    tok = Tokenizer(models.WordLevel({"Paris": 0, "is": 1, "lovely": 2, "[UNK]": 3},
                                     unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    bare = "\n".join(line for line in fixture("vllm_chat.txt").splitlines()
                     if '"usage"' not in line)
    counted = result_of(bare, tokenizer=str(path), body=ASKED)
    assert (counted.output_tokens, counted.tokens_from) == (3, TOKENIZER)
    assert counted.tokens_counted and NO_USAGE in counted.quirks
    chars = result_of(bare)
    assert (chars.output_tokens, chars.tokens_from) == (len("Paris is lovely"), CHARACTERS)
    assert not chars.tokens_counted and chars.tpot_s is None  # characters are no tokens
    assert set(TOKEN_SOURCES) >= {USAGE, LOGPROBS, TOKENIZER, CHARACTERS}


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


@pytest.mark.parametrize(("name", "message", "quirk"), [
    ("vllm_error.txt", "error in stream: Internal server error", ERROR_IN_STREAM),
    ("tgi_error.txt", "error in stream: Request failed during generation", ERROR_IN_STREAM),
    ("sglang_error.txt", "error in stream: The request was aborted", ERROR_IN_STREAM),
    ("vllm_chat_n2.txt", "a second choice (index 1)", SEVERAL_CHOICES),
])
def test_a_stream_that_would_give_wrong_figures_raises(name: str, message: str,
                                                       quirk: str) -> None:
    pattern = message.replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(StreamError, match=pattern) as caught:
        feed(fixture(name))
    assert caught.value.quirk == quirk


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
    assert result.quirks == (NO_DONE,)


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
    body = streaming_body(record, BodyShape("b"))
    assert body["stream"] is True and body["model"] == "b"
    assert body["stream_options"] == {"x": 1, "include_usage": True}
    assert "logprobs" not in body  # top_logprobs 0: as the traffic asks
    assert record.body == {"messages": [], "stream_options": {"x": 1}, "model": "a"}
    # without the extras (a server that refuses them): the record's own, streamed
    assert streaming_body(record, BodyShape("b", extras=False)) == {**record.body,
                                                                    "model": "b", "stream": True}


@pytest.mark.parametrize(("endpoint", "own", "asked"), [
    ("/v1/chat/completions", {}, {"logprobs": True, "top_logprobs": 3}),
    ("/v1/completions", {}, {"logprobs": 3}),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 1}, {}),  # the record's own
])
def test_logprobs_are_asked_in_each_endpoint_s_shape(endpoint: str, own: dict,
                                                     asked: dict) -> None:
    record = TrafficRecord("r", 0.0, "s", endpoint, {"prompt": "x", **own})
    body = streaming_body(record, BodyShape(top_logprobs=3))
    assert {k: body[k] for k in ("logprobs", "top_logprobs") if k in body} == (asked or own)
    assert added_fields(record, BodyShape(top_logprobs=3)) == tuple(sorted(
        {"stream_options", *asked}))
