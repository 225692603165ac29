"""Auth, batch invariance, overload and graceful shutdown, on one engine of their own:
`--api-key K --batch-invariant --max-batch-size 8 --max-queue 8` (8 running, 8 waiting,
the rest of a burst gets 429)."""

from __future__ import annotations

import json
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from layergate.harness.stack.engines import start_engine

pytestmark = [pytest.mark.model, pytest.mark.slow]

KEY = "sesame-123"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHAT = "/v1/chat/completions"


def body(text: str, **extra) -> dict:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": 24,
            "temperature": 0, **extra}


@pytest.fixture(scope="module")
def tight_engine():
    proc = start_engine("--skip-policy", "full", "--api-key", KEY, "--batch-invariant",
                        "--max-batch-size", "8", "--max-queue", "8")
    yield proc
    proc.stop()


def test_api_key_required_on_v1_only(tight_engine):
    url = tight_engine.url
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
        r = httpx.post(url + CHAT, json=body("hi"), headers=headers, timeout=30)
        assert r.status_code == 401, r.text
        assert r.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(f"{url}/v1/models").status_code == 401
    assert httpx.get(f"{url}/v1/models", headers=AUTH).status_code == 200
    # probes and scrapes need no key
    assert httpx.get(f"{url}/health").status_code == 200
    assert httpx.get(f"{url}/metrics").status_code == 200
    ok = httpx.post(url + CHAT, json=body("hi", max_tokens=2), headers=AUTH, timeout=60)
    assert ok.status_code == 200, ok.text


PROMPTS = ["Hi!", "What is 2 + 2?", "Name three fruits.",
           "Write a haiku about autumn leaves falling on a quiet pond.",
           "Explain gravity to a child in one sentence.", "Translate 'cat' into French.",
           "List the days of the week, starting on Monday, separated by commas.", "Why?"]


def test_eight_concurrent_match_one_at_a_time_under_batch_invariant(tight_engine):
    def tokens(prompt: str) -> list[int]:
        r = httpx.post(tight_engine.url + CHAT, json=body(prompt, max_tokens=5), headers=AUTH,
                       timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["layergate"]["batch_invariant"] is True
        return r.json()["layergate"]["token_ids"]

    alone = [tokens(p) for p in PROMPTS]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(tokens, PROMPTS))
    assert together == alone


def test_burst_past_the_queue_gets_429_with_retry_after(tight_engine):
    def send(i: int) -> httpx.Response:
        return httpx.post(tight_engine.url + CHAT, json=body(f"Count to {i + 20}.", max_tokens=3),
                          headers=AUTH, timeout=120)

    with ThreadPoolExecutor(24) as pool:
        responses = list(pool.map(send, range(24)))
    statuses = sorted(r.status_code for r in responses)
    assert set(statuses) <= {200, 429}, statuses
    assert statuses.count(200) >= 8, statuses  # 8 running + 8 waiting fit
    rejected = [r for r in responses if r.status_code == 429]
    assert rejected, statuses
    for r in rejected:
        assert int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["type"] == "rate_limit_error"
    # the server recovers: once the burst is served, a request goes through
    assert httpx.post(tight_engine.url + CHAT, json=body("hi", max_tokens=2), headers=AUTH,
                      timeout=60).status_code == 200


def test_sigterm_finishes_in_flight_request_then_exits_0(tight_engine):
    """Runs last in this module: it stops the engine."""
    first_token = threading.Event()
    result: dict = {}
    chunks: list[str] = []

    def stream() -> None:
        with httpx.stream("POST", tight_engine.url + CHAT, headers=AUTH, timeout=120,
                          json=body("Describe a forest in detail.", max_tokens=40,
                                    stream=True)) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    chunks.append(line[6:])
                    first_token.set()
        result["done"] = True

    client = threading.Thread(target=stream)
    client.start()
    assert first_token.wait(60), tight_engine.log()[-2000:]
    tight_engine.popen.send_signal(signal.SIGTERM)
    at_signal = len(chunks)
    time.sleep(0.3)
    # no new work once shutdown began
    with pytest.raises(httpx.TransportError):
        httpx.post(tight_engine.url + CHAT, json=body("hi"), headers=AUTH, timeout=5)
    client.join(120)
    assert tight_engine.popen.wait(60) == 0, tight_engine.log()[-3000:]
    assert result.get("done") and len(chunks) > at_signal + 1  # it was still in flight
    assert chunks[-1] == "[DONE]"
    final = json.loads(chunks[-2])
    assert final["choices"][0]["finish_reason"] in ("stop", "length")
    assert final["usage"]["completion_tokens"] == len(final["layergate"]["token_ids"])
