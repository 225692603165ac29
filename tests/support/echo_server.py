"""A trivial OpenAI-compatible server for measuring the replayer itself: it echoes the
prompt's words back as tokens (up to max_tokens), streamed or not, with no model and no
delay unless `--token-delay` asks for one. Raw ASGI on uvicorn, so its own cost is small.

    python tests/support/echo_server.py --port 8011 [--token-delay 0.0] [--slots N] [--processes 1]
        [--garble]

`--slots N` makes it a server of known capacity: at most N requests generate at once, each
taking `--token-delay` per token; the others wait in a queue (first come, first served), so
under a load the waiting shows in the TTFT, as in an engine with N batch slots.

`--first-token-delay S` waits S before the first token instead of `--token-delay` (a fixed
time to first token apart from the time per token). `--timeline FILE` appends one JSON line
per streamed request, as this server saw it: `arrived`, `first` and `last` (wall-clock
seconds at which the request came in and its first and last token went out), `tokens` and
`waited` (seconds in the slot queue): the truth a load generator's figures are held to.

`--processes N` runs N uvicorn worker processes on the one port, so that the server is not
what limits a benchmark of several replay workers. `--garble` answers other words than the
prompt's (a candidate whose outputs are broken, for tests of the gate).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time
from typing import Any

import uvicorn

COUNTER = {"requests": 0}


def _words(body: dict[str, Any]) -> list[str]:
    if "messages" in body:
        text = " ".join(str(m.get("content", "")) for m in body["messages"])
    else:
        text = str(body.get("prompt", ""))
    return text.split() or ["echo"]


def _chunk(chat: bool, text: str | None, finish: str | None, **extra: Any) -> bytes:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text} if text else {}
    else:
        choice["text"] = text or ""
    payload = {"id": "echo", "object": "chat.completion.chunk" if chat else "text_completion",
               "model": "echo", "choices": [choice], **extra}
    return f"data: {json.dumps(payload)}\n\n".encode()


def _answer(body: dict[str, Any], garble: bool = False
            ) -> tuple[list[str], str, dict[str, Any], dict[str, Any]]:
    words = [w[::-1] + "x" for w in _words(body)] if garble else _words(body)
    max_tokens = int(body.get("max_tokens") or 16)
    out = [w + " " for w in (words * (max_tokens // len(words) + 1))[:max_tokens]]
    finish = "length"
    usage = {"prompt_tokens": len(words), "completion_tokens": len(out),
             "total_tokens": len(words) + len(out)}
    ext = {"policy": "echo", "token_ids": [hash(w) % 50000 for w in out],
           "peak_memory_bytes": 0}
    return out, finish, usage, ext


async def _read_body(receive) -> bytes:
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


async def _send_json(send, status: int, obj: Any, content_type: str = "application/json") -> None:
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode())]})
    await send({"type": "http.response.body", "body": data})


class Timing:
    """How this server paces an answer and where it writes what it did."""

    def __init__(self, token_delay: float = 0.0, first_token_delay: float | None = None,
                 timeline: str | None = None) -> None:
        self.token_delay = token_delay
        self.first_token_delay = token_delay if first_token_delay is None else first_token_delay
        # line-buffered appends: each line is one write, whole even with several writers
        self.timeline = open(timeline, "a", buffering=1) if timeline else None  # noqa: SIM115

    def delay(self, i: int) -> float:
        return self.first_token_delay if i == 0 else self.token_delay

    def record(self, **times: float) -> None:
        if self.timeline is not None:
            self.timeline.write(json.dumps(times) + "\n")


def make_app(token_delay: float = 0.0, slots: int = 0, garble: bool = False,
             timing: Timing | None = None):
    gate = asyncio.Semaphore(slots) if slots else contextlib.nullcontext()
    timing = timing or Timing(token_delay)

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        path = scope["path"]
        if scope["method"] == "GET":
            if path == "/metrics":
                text = f"echo_requests_total {COUNTER['requests']}\n".encode()
                return await _send_json(send, 200, text, "text/plain; version=0.0.4")
            return await _send_json(send, 200, {"status": "ok", "data": [{"id": "echo"}]})
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return await _send_json(send, 404, {"error": {"message": f"no route {path}"}})
        arrived = time.time()
        body = json.loads(await _read_body(receive) or b"{}")
        COUNTER["requests"] += 1
        async with gate:  # a free slot, after those that came first
            await _generate(send, path, body, timing, garble, arrived)
    return app


async def _generate(send, path: str, body: dict[str, Any], timing: Timing,
                    garble: bool = False, arrived: float = 0.0) -> None:
    chat = path.endswith("chat/completions")
    out, finish, usage, ext = _answer(body, garble)
    if not body.get("stream"):
        choice = {"index": 0, "finish_reason": finish}
        text = "".join(out)
        choice.update({"message": {"role": "assistant", "content": text}} if chat
                      else {"text": text})
        return await _send_json(send, 200, {"id": "echo", "model": "echo",
                                            "created": int(time.time()),
                                            "choices": [choice], "usage": usage,
                                            "layergate": ext})
    started = time.time()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    first = started
    for i, word in enumerate(out):
        if timing.delay(i):
            await asyncio.sleep(timing.delay(i))
        last = i == len(out) - 1
        chunk = _chunk(chat, word, finish if last else None,
                       **({"usage": usage, "layergate": ext} if last else {}))
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        first = time.time() if i == 0 else first
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
    timing.record(arrived=arrived, first=first, last=time.time(), tokens=len(out),
                  waited=started - arrived)


DELAY_ENV = "ECHO_TOKEN_DELAY"


def app_from_env():
    """The app for uvicorn's worker processes (they import it by name)."""
    return make_app(float(os.environ.get(DELAY_ENV, "0")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-delay", type=float, default=0.0, help="seconds per token")
    parser.add_argument("--slots", type=int, default=0,
                        help="requests generating at once, the rest queue (0: no limit)")
    parser.add_argument("--processes", type=int, default=1, help="uvicorn worker processes")
    parser.add_argument("--garble", action="store_true", help="answer other words")
    parser.add_argument("--first-token-delay", type=float, default=None,
                        help="seconds before the first token (default: --token-delay)")
    parser.add_argument("--timeline", default=None,
                        help="append each streamed request's times to this JSONL file")
    args = parser.parse_args()
    if args.processes > 1:
        os.environ[DELAY_ENV] = str(args.token_delay)
        uvicorn.run("echo_server:app_from_env", factory=True, workers=args.processes,
                    app_dir=os.path.dirname(os.path.abspath(__file__)), host=args.host,
                    port=args.port, log_level="warning", access_log=False)
        return
    timing = Timing(args.token_delay, args.first_token_delay, args.timeline)
    uvicorn.run(make_app(args.token_delay, args.slots, args.garble, timing), host=args.host,
                port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
