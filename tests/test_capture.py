"""The capture proxy in front of a real engine: answers pass through unchanged (streamed and
not), records are written without headers, redaction, a failing writer never breaks the
client, and capture -> replay reproduces the captured requests."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from layergate.exporters.traffic import read_traffic
from layergate.harness.capture.redact import redact, redact_text
from layergate.harness.processes import ManagedProcess, free_port, layergate_command
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.rundir import load_run

pytestmark = [pytest.mark.locust]

SECRET = "Bearer sk-live-abcdefghijklmnopqrstuvwx"


@contextlib.contextmanager
def capture_proxy(upstream: str, out: Path, *extra: str) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log = out.with_suffix(".log") if out.suffix else Path(f"/tmp/capture-{port}.log")
    proc = subprocess.Popen(layergate_command("capture", "--upstream", upstream, "--out", str(out),
                                              "--listen", f"127.0.0.1:{port}", *extra),
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"capture proxy did not start:\n{log.read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{url}/-/capture/metrics", timeout=1)
                break
            time.sleep(0.2)
        yield url, log
    finally:
        proc.terminate()
        proc.wait(20)


def _chat(text: str, **extra) -> dict:
    return {"messages": [{"role": "user", "content": text}], "max_tokens": 6, "temperature": 0,
            **extra}


def _streamed_text(body: str) -> str:
    out = []
    for line in body.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices", []):
                out.append(choice.get("delta", {}).get("content") or "")
    return "".join(out)


@pytest.mark.model
def test_capture_then_replay_round_trip(tmp_path: Path, full_engine: ManagedProcess) -> None:
    out = tmp_path / "captured.jsonl"
    sent = [("/v1/chat/completions", _chat("What is a Python decorator?", stream=True,
                                            stream_options={"include_usage": True})),
            ("/v1/chat/completions", _chat("Name three colours of the rainbow, please.")),
            ("/v1/completions", {"prompt": "The capital of France is", "max_tokens": 4,
                                 "temperature": 0})]
    answers = []
    with capture_proxy(full_engine.url, out) as (url, _):
        models = httpx.get(f"{url}/v1/models", timeout=10)
        assert models.json() == httpx.get(f"{full_engine.url}/v1/models", timeout=10).json()
        for path, body in sent:
            answers.append(httpx.post(url + path, json=body, timeout=120,
                                      headers={"Authorization": SECRET}))
        direct = httpx.post(full_engine.url + sent[1][0], json=sent[1][1], timeout=120).json()
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert answers[0].headers["content-type"].startswith("text/event-stream")
    assert answers[0].text.rstrip().endswith("data: [DONE]")
    assert answers[1].json()["choices"] == direct["choices"]  # passed through unchanged

    raw = out.read_text()
    assert "sk-live" not in raw and "Authorization" not in raw
    records = read_traffic(out).records
    assert [(r.endpoint, dict(r.body)) for r in records] == sent
    assert records[0].offset_s == 0.0 and records[0].offset_s < records[1].offset_s
    assert records[0].scenario == "short"  # 6 words of prompt, from usage.prompt_tokens
    streamed = _streamed_text(answers[0].text)
    assert records[0].response["choices"][0]["message"]["content"] == streamed
    assert records[0].response["layergate"]["token_ids"]
    assert records[1].response == answers[1].json()

    run_dir = run_replay(ReplayConfig(out=tmp_path / "run", traffic=out, users=1,
                                      arms={"baseline": full_engine.url,
                                            "candidate": full_engine.url}, progress=False))
    run = load_run(run_dir)
    assert run.manifest.status == "complete"
    assert [(r.id, r.endpoint, r.body) for r in run.traffic.records] == [
        (r.id, r.endpoint, r.body) for r in records]
    replayed = {r.request_id: r.output_text for r in run.results if r.arm == "baseline"}
    recorded = [r.response["choices"][0] for r in records]
    texts = [c.get("message", {}).get("content", c.get("text")) for c in recorded]
    assert [replayed[r.id] for r in records] == texts


@pytest.mark.model
def test_redact_and_write_failure_never_break_the_client(tmp_path: Path,
                                                         full_engine: ManagedProcess) -> None:
    out = tmp_path / "red.jsonl"
    body = _chat("Reach me at jane.doe@example.org or +44 20 7946 0958, token "
                 "sk-proj-0123456789abcdefghijkl")
    with capture_proxy(full_engine.url, out, "--redact") as (url, _):
        assert httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120).status_code == 200
    content = read_traffic(out).records[0].body["messages"][0]["content"]
    assert content == "Reach me at [EMAIL] or [PHONE], token [API_KEY]"

    with capture_proxy(full_engine.url, Path("/dev/full")) as (url, log):
        answer = httpx.post(f"{url}/v1/chat/completions", json=_chat("hi"), timeout=120)
        counters = httpx.get(f"{url}/-/capture/metrics", timeout=5).text
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"]
    assert "layergate_capture_write_errors_total 1.0" in counters
    assert "could not write record" in log.read_text()


def test_redaction_patterns() -> None:
    assert redact_text("mail a.b+c@mail.co.uk now") == "mail [EMAIL] now"
    assert redact_text("call (415) 555-0132 or 415.555.0132") == "call [PHONE] or [PHONE]"
    assert redact_text("in 2024 we sold 1,250 units; order #12345") == \
        "in 2024 we sold 1,250 units; order #12345"
    assert redact_text("key AKIAIOSFODNN7EXAMPLE and ghp_" + "a1" * 18) == \
        "key [API_KEY] and [API_KEY]"
    assert redact({"role": "user", "content": ["x@y.io"], "n": 3}) == {
        "role": "user", "content": ["[EMAIL]"], "n": 3}


def test_length_class_estimate_agrees_with_the_bundled_labels() -> None:
    """The proxy has no tokenizer; its estimate must label like the tokenizer-made labels."""
    from layergate.harness.capture.recorder import prompt_token_estimate
    from layergate.harness.scenarios import SCENARIOS_DIR, length_class

    records = [r for name in ("eval", "chat-multiturn", "calibration")
               for r in read_traffic(SCENARIOS_DIR / "traffic" / f"{name}.jsonl").records]
    agree = sum(r.scenario == length_class(prompt_token_estimate(r.endpoint, dict(r.body), {}))
                for r in records)
    assert agree / len(records) >= 0.9
