"""The HTTP API on a real full-depth SmolLM2 engine (the shared `full_engine`): response
shapes, streaming against whole responses, seeds, logprobs, metrics, concurrency, and a
client that walks away mid-stream."""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = [pytest.mark.model, pytest.mark.prometheus]

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
EXTENSION_KEYS = {"policy", "layers_total", "layers_executed_per_token", "token_ids",
                  "prefix_cache_hit_tokens", "peak_memory_bytes", "queue_time_s",
                  "prefill_time_s", "decode_time_s"}


def chat_body(text: str, **extra) -> dict:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": 6,
            "temperature": 0, **extra}


def post(url: str, path: str, body: dict, timeout: float = 60) -> dict:
    r = httpx.post(url + path, json=body, timeout=timeout)
    assert r.status_code == 200, r.text
    return r.json()


def stream(url: str, path: str, body: dict) -> list[dict]:
    """Every `data:` payload of an SSE response, [DONE] as the string itself."""
    out: list = []
    with httpx.stream("POST", url + path, json={**body, "stream": True}, timeout=60) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[len("data: "):]
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


def metric(url: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                total += sample.value
    return total


def test_models_and_health(full_engine):
    models = httpx.get(f"{full_engine.url}/v1/models").json()
    assert models["object"] == "list"
    [card] = models["data"]
    assert card["id"] == "smollm2-135m" and card["object"] == "model"
    health = httpx.get(f"{full_engine.url}/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert httpx.get(f"{full_engine.url}/v1/models/smollm2-135m").json()["id"] == "smollm2-135m"


def test_chat_response_shape_and_extension(full_engine):
    body = post(full_engine.url, CHAT, chat_body("Name a colour.", model="smollm2-135m"))
    assert body["object"] == "chat.completion" and body["model"] == "smollm2-135m"
    [choice] = body["choices"]
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"]
    assert choice["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    ext = body["layergate"]
    assert EXTENSION_KEYS <= ext.keys()
    assert ext["policy"] == "full" and ext["layers_total"] == 30
    assert len(ext["token_ids"]) == usage["completion_tokens"]
    assert set(ext["layers_executed_per_token"]) == {30}


@pytest.mark.parametrize("path", [CHAT, COMPLETIONS])
def test_stream_matches_whole_response(full_engine, path):
    body = (chat_body("Write one sentence about the sea.") if path == CHAT else
            {"prompt": "The capital of France is", "max_tokens": 6, "temperature": 0})
    whole = post(full_engine.url, path, body)
    chunks = stream(full_engine.url, path, body)
    assert chunks[-1] == "[DONE]"
    final = chunks[-2]
    assert final["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert final["usage"] == whole["usage"]
    assert final["layergate"]["token_ids"] == whole["layergate"]["token_ids"]
    deltas = [c["choices"][0] for c in chunks[:-2]]
    if path == CHAT:
        assert chunks[0]["object"] == "chat.completion.chunk"
        assert deltas[0]["delta"]["role"] == "assistant"
        text = "".join(d["delta"].get("content", "") for d in deltas)
        assert text == whole["choices"][0]["message"]["content"]
        # one chunk per generated token, after the role chunk
        assert len(deltas) - 1 == whole["usage"]["completion_tokens"]
    else:
        assert "".join(d["text"] for d in deltas) == whole["choices"][0]["text"]
        assert len(deltas) == whole["usage"]["completion_tokens"]


def test_same_seed_same_sample(full_engine):
    body = chat_body("Tell me a story.", temperature=1.0, seed=7, max_tokens=8)
    first = post(full_engine.url, CHAT, body)["layergate"]["token_ids"]
    # streamed with the same seed: the same sample
    assert stream(full_engine.url, CHAT, body)[-2]["layergate"]["token_ids"] == first
    others = {tuple(post(full_engine.url, CHAT, {**body, "seed": s})["layergate"]["token_ids"])
              for s in (8, 9)}
    assert others != {tuple(first)}, "different seeds never changed the sample"


def test_chat_logprobs_shape(full_engine):
    body = post(full_engine.url, CHAT, chat_body("Say hello.", logprobs=True, top_logprobs=3))
    content = body["choices"][0]["logprobs"]["content"]
    assert len(content) == body["usage"]["completion_tokens"]
    for entry in content:
        assert isinstance(entry["token"], str) and entry["logprob"] <= 0
        assert entry["bytes"] == list(entry["token"].encode())
        tops = entry["top_logprobs"]
        assert 1 <= len(tops) <= 3
        assert all({"token", "logprob", "bytes"} <= t.keys() for t in tops)
        # greedy: the chosen token is the most likely one
        assert entry["logprob"] == pytest.approx(max(t["logprob"] for t in tops), abs=1e-4)
    chunks = stream(full_engine.url, CHAT, chat_body("Say hello.", logprobs=True,
                                                     top_logprobs=3))
    streamed = [e for c in chunks[1:-2] for e in c["choices"][0]["logprobs"]["content"]]
    assert [e["token"] for e in streamed] == [e["token"] for e in content]


def test_completion_logprobs_shape(full_engine):
    body = post(full_engine.url, COMPLETIONS,
                {"prompt": "One, two, three,", "max_tokens": 6, "temperature": 0, "logprobs": 2})
    lp = body["choices"][0]["logprobs"]
    n = body["usage"]["completion_tokens"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == n
    assert len(lp["text_offset"]) == n and lp["text_offset"][0] == 0
    assert "".join(lp["tokens"]) == body["choices"][0]["text"]
    for top in lp["top_logprobs"]:
        assert 1 <= len(top) <= 2 and all(v <= 0 for v in top.values())
    without = post(full_engine.url, COMPLETIONS, {"prompt": "One, two, three,", "max_tokens": 2})
    assert without["choices"][0]["logprobs"] is None


def test_stop_sequence_cuts_output(full_engine):
    free = post(full_engine.url, COMPLETIONS,
                {"prompt": "1, 2, 3, 4,", "max_tokens": 8, "temperature": 0})
    text = free["choices"][0]["text"]
    assert len(text) > 3
    stop = text[2:4]
    cut = post(full_engine.url, COMPLETIONS, {"prompt": "1, 2, 3, 4,", "max_tokens": 8,
                                              "temperature": 0, "stop": [stop, "zzz"]})
    assert cut["choices"][0]["finish_reason"] == "stop"
    assert stop not in cut["choices"][0]["text"]
    assert text.startswith(cut["choices"][0]["text"])


def test_eight_concurrent_requests_complete(full_engine):
    prompts = [f"Count from {i} to {i + 5}." for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        bodies = list(pool.map(lambda p: post(full_engine.url, CHAT, chat_body(p)), prompts))
    for body in bodies:
        assert body["choices"][0]["finish_reason"] in ("stop", "length")
        assert body["usage"]["completion_tokens"] >= 1


def test_metrics_parse_promtool_and_move(full_engine, promtool_bin):
    before = metric(full_engine.url, "layergate_requests_total")
    tokens_before = metric(full_engine.url, "layergate_generation_tokens_total")
    body = post(full_engine.url, CHAT, chat_body("Hi!"))
    # the engine records a request just after its last event: allow it a moment
    deadline = time.monotonic() + 5
    while metric(full_engine.url, "layergate_requests_total") < before + 1:
        assert time.monotonic() < deadline, "layergate_requests_total did not move"
        time.sleep(0.05)
    assert metric(full_engine.url, "layergate_requests_total") == before + 1
    assert (metric(full_engine.url, "layergate_generation_tokens_total")
            == tokens_before + body["usage"]["completion_tokens"])
    text = httpx.get(f"{full_engine.url}/metrics").text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"layergate_requests", "layergate_running_requests",
            "layergate_time_to_first_token_seconds"} <= names
    lint = subprocess.run([promtool_bin, "check", "metrics"], input=text, text=True,
                          capture_output=True, timeout=30)
    assert lint.returncode == 0 and not lint.stdout.strip(), lint.stdout + lint.stderr


def _wait_idle(url: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while metric(url, "layergate_running_requests") or metric(url, "layergate_queue_depth"):
        assert time.monotonic() < deadline, "the engine still runs a request nobody waits for"
        time.sleep(0.1)


def test_disconnect_mid_stream_frees_the_slot(full_engine):
    tokens_before = metric(full_engine.url, "layergate_generation_tokens_total")
    body = chat_body("Write a very long essay about rivers.", max_tokens=400, temperature=0,
                     stream=True)
    with httpx.stream("POST", f"{full_engine.url}{CHAT}", json=body, timeout=60) as r:
        lines = r.iter_lines()
        seen = sum(1 for _, line in zip(range(6), lines, strict=False) if line.startswith("data"))
        assert seen >= 3
    # the connection is closed here: the engine must stop decoding for nobody
    _wait_idle(full_engine.url)
    spent = metric(full_engine.url, "layergate_generation_tokens_total") - tokens_before
    assert spent < 200, f"{spent} tokens generated after the client left"


def test_disconnect_while_waiting_for_whole_response_frees_the_slot(full_engine):
    body = chat_body("Write a very long essay about mountains.", max_tokens=400)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{full_engine.url}{CHAT}", json=body, timeout=1.0)
    _wait_idle(full_engine.url)


def test_json_body_read_whatever_the_content_type(full_engine):
    """`curl -d '{...}'` labels JSON as a form; the API reads it as JSON anyway."""
    raw = json.dumps({"prompt": "Hello", "max_tokens": 2, "temperature": 0})
    for content_type in ("application/x-www-form-urlencoded", "text/plain"):
        r = httpx.post(f"{full_engine.url}{COMPLETIONS}", content=raw, timeout=60,
                       headers={"content-type": content_type})
        assert r.status_code == 200, r.text
