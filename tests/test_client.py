"""`client.send`: one send path over the transport seam. Error paths through
`httpx.MockTransport` (fakes of what servers answer, no network); the deadline, refused
connections, early closes and the servers' real streams through a real local server, over
both transports — httpx here, gevent in its own process as under Locust — which must give
the same results."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.processes import free_port
from layergate.harness.replay.client import Target, send
from layergate.harness.replay.httpx_transport import HttpxTransport
from tests.support.stream_server import (
    FIXTURES,
    SLOW_HEADERS_S,
    SPLIT_PIECES,
    SPLIT_TEXT,
    fixture_events,
    stream_server,
)

ROOT = Path(__file__).resolve().parent.parent
RECORD = TrafficRecord("r1", 0.0, "short", "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})


def mock(handler) -> HttpxTransport:
    return HttpxTransport(httpx.Client(transport=httpx.MockTransport(handler)))


def sse(*events: str) -> bytes:
    return "".join(f"{e}\n\n" for e in events).encode()


def send_mock(handler, timeout: float = 5.0, late_s: float = 0.0, **kw: Any) -> ArmResult:
    return send(mock(handler), Target("candidate", "http://arm.test/base"), RECORD,
                intended=time.perf_counter() - late_s, timeout=timeout, **kw)


def test_the_request_streams_with_usage_and_passes_headers() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=b"".join(fixture_events("vllm_chat.txt")))

    result = send(mock(handler), Target("baseline", "http://arm.test/base/", "m1"), RECORD,
                  intended=time.perf_counter(), timeout=5, headers={"traceparent": "00-x"},
                  repeat=2, concurrency=4)
    assert result.ok and result.arm == "baseline" and result.output_text == "Paris is lovely"
    assert (result.repeat, result.concurrency, result.http_status) == (2, 4, 200)
    request = seen[0]
    assert str(request.url) == "http://arm.test/base/v1/chat/completions"
    body = json.loads(request.content)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "m1" and body["max_tokens"] == 8
    assert request.headers["traceparent"] == "00-x"
    assert request.headers["accept"] == "text/event-stream"


@pytest.mark.parametrize(("status", "body", "expected"), [
    (400, {"error": {"message": "max_tokens must be >= 1", "type": "invalid_request_error"}},
     "HTTP 400: max_tokens must be >= 1"),
    (422, {"error": "Input validation error: inputs too long", "error_type": "validation"},
     "HTTP 422: Input validation error: inputs too long"),
    (429, {"error": {"message": "the engine is at capacity", "code": "overloaded"}},
     "HTTP 429: the engine is at capacity"),
    (503, "upstream unavailable", "HTTP 503: upstream unavailable"),
])
def test_http_errors_are_failed_results_with_the_server_s_message(
        status: int, body: Any, expected: str) -> None:
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    result = send_mock(lambda request: httpx.Response(status, content=content))
    assert not result.ok and result.error == expected and result.http_status == status
    assert result.e2e_s is not None and result.scenario == "short"


@pytest.mark.parametrize(("content", "message"), [
    (sse('data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}', "data: [DONE]"),
     "stream ended without a finish_reason"),
    (sse('data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}'),
     "the connection closed early"),
    (sse("data: {oops"), "invalid JSON in stream"),
    (b'{"choices": [{"message": {"content": "a"}, "finish_reason": "stop"}]}',
     "held no SSE `data:` line"),
    (b"".join(fixture_events("tgi_error.txt")), "error in stream: Request failed"),
    (b"".join(fixture_events("vllm_chat_n2.txt")), "a second choice (index 1)"),
])
def test_broken_streams_are_failed_results(content: bytes, message: str) -> None:
    result = send_mock(lambda request: httpx.Response(200, content=content))
    assert not result.ok and message in result.error, result.error
    assert result.http_status == 200


def test_a_connection_closed_before_any_answer_is_tried_once_more() -> None:
    """An idle kept-alive connection the server closes as the request goes out on it: sent
    again once, on another connection; a second break is the result."""
    calls: list[int] = []

    def closes_once(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, content=b"".join(fixture_events("vllm_chat.txt")))

    result = send_mock(closes_once)
    assert result.ok and result.output_text == "Paris is lovely" and len(calls) == 2
    calls.clear()

    def always_closes(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    result = send_mock(always_closes)
    assert not result.ok and result.error.startswith("connection broken") and len(calls) == 2


@pytest.mark.parametrize(("exc", "message"), [
    (httpx.ConnectError("[Errno 111] Connection refused"), "connection failed: [Errno 111]"),
    (httpx.ReadTimeout("timed out"), "timeout after 5.0s"),
    (httpx.RemoteProtocolError("peer closed connection"),
     "connection broken: RemoteProtocolError: peer closed connection"),
])
def test_transport_errors_are_worded_the_same_way(exc: Exception, message: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    result = send_mock(handler)
    assert not result.ok and result.error.startswith(message) and result.http_status is None


def test_a_send_already_past_its_deadline_never_goes_out() -> None:
    calls: list[httpx.Request] = []
    result = send_mock(lambda request: calls.append(request) or httpx.Response(200),
                       timeout=5.0, late_s=6.0)
    assert not result.ok and result.error.startswith("timeout after 5.0s")
    assert calls == [] and result.e2e_s >= 6.0


def test_latency_counts_from_the_intended_send() -> None:
    content = b"".join(fixture_events("vllm_chat.txt"))
    result = send_mock(lambda request: httpx.Response(200, content=content), late_s=2.0)
    assert result.ok and result.ttft_s >= 2.0 and result.e2e_s >= result.ttft_s


# --- a real server, both transports ---------------------------------------------------

FIXTURE_CASES = sorted(p.name for p in FIXTURES.glob("*.txt"))


def _cases(url: str) -> list[dict[str, Any]]:
    """(case name, send arguments) for the real server at `url`."""
    cases = [{"name": name, "url": f"{url}/fixture/{name}", "timeout": 10.0}
             for name in FIXTURE_CASES]
    cases += [
        {"name": "http 400", "url": f"{url}/status/400", "timeout": 10.0},
        {"name": "strict", "url": f"{url}/strict/vllm_chat.txt", "timeout": 10.0},
        {"name": "refused", "url": f"http://127.0.0.1:{free_port()}", "timeout": 10.0},
        {"name": "close early", "url": f"{url}/close-early", "timeout": 10.0},
        {"name": "split", "url": f"{url}/split", "timeout": 10.0},
        {"name": "trickle", "url": f"{url}/trickle", "timeout": 2.0},
        {"name": "slow headers", "url": f"{url}/slow-headers", "timeout": SLOW_HEADERS_S + 1},
        {"name": "late", "url": f"{url}/fixture/vllm_chat.txt", "timeout": 1.0, "late_s": 2.0},
    ]
    for case in cases:
        case["record"] = RECORD.to_json()
    return cases


def _send_httpx(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    transport = HttpxTransport()
    try:
        return [json.loads(json.dumps(dataclasses.asdict(send(
            transport, Target("candidate", c["url"]), RECORD,
            intended=time.perf_counter() - c.get("late_s", 0.0), timeout=c["timeout"]))))
            for c in cases]  # through JSON, as the gevent process hands them over
    finally:
        transport.close()


def _send_gevent(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "tests.support.gevent_send"],
                          input=json.dumps(cases), capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _kind(result: dict[str, Any]) -> str:
    """What a result says, without the library's own wording."""
    if result["ok"]:
        return "ok"
    return result["error"].split(":")[0]


@pytest.mark.parametrize("send_all", [_send_httpx, _send_gevent], ids=["httpx", "gevent"])
def test_a_real_server_through_each_transport(send_all) -> None:
    with stream_server() as server:
        cases = _cases(server.url)
        results = {c["name"]: r for c, r in zip(cases, send_all(cases), strict=True)}
    expected_ok = {"vllm_chat.txt", "vllm_chat_speculative.txt", "tgi_chat.txt",
                   "sglang_chat.txt", "llamacpp_chat.txt", "llamacpp_python_chat.txt",
                   "layergate_chat.txt", "layergate_completions.txt",
                   "vllm_0.32_chat_reported.txt", "sglang_0.5.23_chat_reported.txt",
                   # tool calls, reasoning and structured outputs, as real servers sent them
                   "vllm_0.32_tool_calls.txt", "vllm_0.32_tool_calls_both_parsers.txt",
                   "vllm_0.32_tool_choice_named.txt", "vllm_0.32_tool_choice_required_length.txt",
                   "vllm_0.32_reasoning.txt", "vllm_0.32_reasoning_logprobs.txt",
                   "vllm_0.32_reasoning_late_marker.txt", "vllm_0.32_json_schema.txt",
                   "llamacpp_python_tools.txt", "llamacpp_python_tool_choice_named.txt",
                   "sglang_0.5.23_reasoning_tool_calls.txt"}
    for name in FIXTURE_CASES:
        assert results[name]["ok"] == (name in expected_ok), (name, results[name]["error"])
    assert results["tgi_chat.txt"]["output_text"] == "OK!"
    assert results["layergate_chat.txt"]["token_ids"] == [504, 7302, 314, 253]
    assert results["vllm_0.32_chat_reported.txt"]["reported"]["draft_steps"] == 5
    assert results["sglang_0.5.23_chat_reported.txt"]["reported"]["draft_steps"] == 4
    assert results["vllm_error.txt"]["error"] == "error in stream: Internal server error"
    # a bad response_format schema, streamed: HTTP 200 and an error event (vLLM 0.32)
    assert results["vllm_0.32_schema_error.txt"]["error"] == (
        "error in stream: Grammar error: Invalid type: objekt")
    assert results["http 400"]["error"] == "HTTP 400: status 400 as asked"
    # refused what layergate adds (stream_options), answered without it: handled, recorded
    assert results["strict"]["ok"] and results["strict"]["quirks"] == ["added_fields_rejected"]
    assert results["sglang_error.txt"]["quirks"] == ["error_in_stream"]
    assert results["vllm_chat_n2.txt"]["quirks"] == ["several_choices"]
    assert results["refused"]["error"].startswith("connection failed")
    # closed mid-body: the chunked framing broke, or the stream just ended; never ok
    assert _kind(results["close early"]) in ("connection broken", "stream ended without a "
                                                                  "finish_reason (and no [DONE]")
    assert results["close early"]["quirks"] == ["closed_early"]
    assert results["late"]["error"].startswith("timeout after 1.0s: its send time")
    # lines and UTF-8 characters cut across reads, CRLF line ends, a comment: the same answer
    split = results["split"]
    assert split["ok"] and split["output_text"] == SPLIT_TEXT, split
    assert split["finish_reason"] == "stop" and len(split["itl_s"]) == len(SPLIT_PIECES) - 1
    # one deadline from the intended send: a server that keeps trickling, or stalls after
    # slow headers, is cut at `timeout` — not `timeout` after the last byte or the headers
    for name, limit in (("trickle", 2.0), ("slow headers", SLOW_HEADERS_S + 1)):
        result = results[name]
        assert result["error"] == f"timeout after {limit}s", result["error"]
        assert limit <= result["e2e_s"] < limit + 1.5, (name, result["e2e_s"])


def test_both_transports_give_the_same_results() -> None:
    with stream_server() as server:
        cases = [c for c in _cases(server.url) if c["name"] not in ("trickle", "slow headers")]
        by_httpx, by_gevent = _send_httpx(cases), _send_gevent(cases)
    fields = ("ok", "output_text", "output_tokens", "prompt_tokens", "finish_reason",
              "token_ids", "logprobs", "http_status", "tokens_from", "quirks")
    for case, a, b in zip(cases, by_httpx, by_gevent, strict=True):
        assert {f: a[f] for f in fields} == {f: b[f] for f in fields}, case["name"]
        assert _kind(a) == _kind(b) or case["name"] == "close early", (case["name"], a, b)


def test_a_server_that_refuses_what_layergate_adds_is_asked_without_it_from_then_on() -> None:
    with stream_server() as server:
        target = Target("candidate", f"{server.url}/strict/llamacpp_python_chat.txt",
                        top_logprobs=2)
        transport = HttpxTransport()
        try:
            first, second = (send(transport, target, RECORD, intended=time.perf_counter(),
                                  timeout=10) for _ in range(2))
        finally:
            transport.close()
        bodies = list(server.bodies)
    # refused once with stream_options and logprobs, then sent as the record asks; the
    # second request goes out without them at once
    assert [("stream_options" in b, "logprobs" in b) for b in bodies] == [
        (True, True), (False, False), (False, False)]
    for result in (first, second):
        # usage was not asked the second time, so its absence is no quirk then
        assert result.ok and result.quirks == ("added_fields_rejected",)
        assert result.tokens_from == "logprobs" and result.output_tokens == 4
    assert target.learned.rejects_added_fields


def test_a_refusal_that_is_not_about_the_added_fields_is_not_retried_away() -> None:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(400, json={"error": {"message": "messages: field required"}})

    target = Target("candidate", "http://arm.test")
    result = send(mock(handler), target, RECORD, intended=time.perf_counter(), timeout=5)
    assert not result.ok and result.error == "HTTP 400: messages: field required"
    assert len(seen) == 2 and not target.learned.rejects_added_fields


def test_a_geventhttpclient_without_its_body_buffer_is_read_with_its_readline() -> None:
    # in a process of its own: gevent stays out of the suite's
    probe = """
from layergate.harness.replay.gevent_transport import _GeventResponse
class Response:  # no _body_buffer, no _sock: another geventhttpclient
    status_code = 200
    def __init__(self): self.left = [b'data: 1\\n', b'data: 2\\r\\n', b'\\n', b'no end']
    def readline(self, sep): return self.left.pop(0) if self.left else b''
print(list(_GeventResponse(Response()).lines()))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "['data: 1', 'data: 2', '']", out
