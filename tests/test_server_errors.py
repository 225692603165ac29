"""Every bad input gets a 4xx with an OpenAI-style error body, never a 500 or a crash
(real full-depth engine, shared `full_engine`)."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.model

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
USER = [{"role": "user", "content": "hi"}]


def chat(**fields) -> dict:
    return {"messages": USER, "max_tokens": 2, **fields}


CASES = [
    # id, path, json body (or raw bytes), status, param, code
    ("invalid-json", CHAT, b'{"messages": [', 400, None, "invalid_json"),
    ("not-an-object", CHAT, b"[1, 2]", 400, None, None),
    ("wrong-type-max-tokens", CHAT, chat(max_tokens="ten"), 400, "max_tokens", None),
    ("bool-as-int", CHAT, chat(max_tokens=True), 400, "max_tokens", None),
    ("missing-messages", CHAT, {"max_tokens": 2}, 400, "messages", None),
    ("empty-messages", CHAT, {"messages": [], "max_tokens": 2}, 400, "messages", None),
    ("bad-role", CHAT, {"messages": [{"role": "wizard", "content": "hi"}]}, 400, None, None),
    ("content-wrong-type", CHAT, {"messages": [{"role": "user", "content": 5}]}, 400, None,
     None),
    ("image-part", CHAT, {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}, 400, None, None),
    ("n-2", CHAT, chat(n=2), 400, "n", "unsupported_value"),
    ("max-tokens-negative", CHAT, chat(max_tokens=-1), 400, "max_tokens", None),
    ("max-tokens-zero", CHAT, chat(max_tokens=0), 400, "max_tokens", None),
    ("max-tokens-huge", CHAT, chat(max_tokens=10**9), 400, "max_tokens",
     "context_length_exceeded"),
    ("max-tokens-beyond-int64", CHAT, chat(max_tokens=10**30), 400, "max_tokens", None),
    ("temperature-high", CHAT, chat(temperature=2.5), 400, "temperature", None),
    ("temperature-negative", CHAT, chat(temperature=-0.1), 400, "temperature", None),
    ("top-p-high", CHAT, chat(top_p=1.5), 400, "top_p", None),
    ("too-many-stops", CHAT, chat(stop=["a", "b", "c", "d", "e"]), 400, "stop", None),
    ("empty-stop", CHAT, chat(stop=""), 400, "stop", None),
    ("top-logprobs-without-logprobs", CHAT, chat(top_logprobs=2), 400, "top_logprobs", None),
    ("top-logprobs-too-many", CHAT, chat(logprobs=True, top_logprobs=21), 400, "top_logprobs",
     None),
    ("penalty", CHAT, chat(presence_penalty=1.0), 400, "presence_penalty",
     "unsupported_value"),
    ("unknown-model", CHAT, chat(model="gpt-9"), 404, "model", "model_not_found"),
    ("prompt-too-long", COMPLETIONS, {"prompt": [28] * 5000, "max_tokens": 1}, 400, "prompt",
     "context_length_exceeded"),
    ("long-chat", CHAT, {"messages": [{"role": "user", "content": "word " * 6000}]}, 400,
     "messages", "context_length_exceeded"),
    ("token-out-of-vocab", COMPLETIONS, {"prompt": [10**7], "max_tokens": 1}, 400, "prompt",
     None),
    ("several-prompts", COMPLETIONS, {"prompt": ["a", "b"], "max_tokens": 1}, 400, "prompt",
     "unsupported_value"),
    ("empty-prompt", COMPLETIONS, {"prompt": "", "max_tokens": 1}, 400, "prompt", None),
    ("missing-prompt", COMPLETIONS, {"max_tokens": 1}, 400, "prompt", None),
    ("echo", COMPLETIONS, {"prompt": "hi", "echo": True}, 400, "echo", "unsupported_value"),
    ("completion-logprobs-type", COMPLETIONS, {"prompt": "hi", "logprobs": True}, 400,
     "logprobs", None),
    ("body-too-large", CHAT, {"messages": [{"role": "user", "content": "x" * (1 << 20)}]},
     413, None, "request_too_large"),
]


def assert_openai_error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and error["message"]
    return error


def post(url: str, path: str, body: dict | bytes) -> httpx.Response:
    if isinstance(body, bytes):
        return httpx.post(url + path, content=body, timeout=30,
                          headers={"content-type": "application/json"})
    return httpx.post(url + path, json=body, timeout=30)


@pytest.mark.parametrize(("path", "body", "status", "param", "code"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_gets_openai_error(full_engine, path, body, status, param, code):
    error = assert_openai_error(post(full_engine.url, path, body), status)
    if param is not None:
        assert error["param"] == param or error["param"].startswith(param), error
    if code is not None:
        assert error["code"] == code, error


def test_chunked_body_over_limit_is_413(full_engine):
    def chunks():
        for _ in range(20):
            yield b"x" * (64 * 1024)

    r = httpx.post(full_engine.url + CHAT, content=chunks(), timeout=30,
                   headers={"content-type": "application/json"})
    assert_openai_error(r, 413)


def test_unknown_route_and_method(full_engine):
    assert_openai_error(httpx.get(full_engine.url + "/v1/nothing"), 404)
    assert_openai_error(httpx.get(full_engine.url + CHAT), 405)
    assert_openai_error(httpx.get(full_engine.url + "/v1/models/gpt-9"), 404)


def test_engine_still_serves_after_bad_inputs(full_engine):
    # every bad input first, here: the test does not rely on the others having run before it
    for _, path, body, status, _, _ in CASES:
        assert post(full_engine.url, path, body).status_code == status
    r = httpx.post(full_engine.url + CHAT, json=chat(temperature=0), timeout=60)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] is not None


def test_vanishing_temperature_or_top_p_means_greedy(full_engine):
    """Found by fuzzing: values that underflow float32 once crashed the sampler (NaN)."""
    greedy = httpx.post(full_engine.url + CHAT, json=chat(temperature=0), timeout=60).json()
    for extra in ({"top_p": 5e-324}, {"temperature": 5e-324}):
        r = httpx.post(full_engine.url + CHAT, json=chat(**extra), timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["layergate"]["token_ids"] == greedy["layergate"]["token_ids"]
