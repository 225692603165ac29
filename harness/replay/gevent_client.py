"""The Locust-side HTTP client: geventhttpclient (what Locust's FastHttpUser is built on),
one connection pool per arm. Under gevent it is several times cheaper per request than
httpx (benchmarks/replay_overhead.py), and the replayer's own cost is part of what it
measures. Imports gevent: only the Locust process may import this module.

Same contract as `client.send_request`: times from the intended send, every failure an
`ArmResult` with `ok=False`, nothing raised.
"""

from __future__ import annotations

import json
import time

from gevent import Timeout
from geventhttpclient import HTTPClient
from geventhttpclient.url import URL

from exporters.records import ArmResult
from exporters.traffic import TrafficRecord
from harness.replay.client import error_message, failure, finish, result_base, streaming_body
from harness.replay.sse import StreamAccumulator, sse_payloads

HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


class ArmClients:
    def __init__(self, arms: dict[str, str], timeout: float, concurrency: int) -> None:
        self.clients: dict[str, HTTPClient] = {}
        self.prefix: dict[str, str] = {}
        for arm, url in arms.items():
            parsed = URL(url)
            self.clients[arm] = HTTPClient.from_url(
                parsed, concurrency=concurrency, connection_timeout=min(timeout, 10.0),
                network_timeout=timeout)
            self.prefix[arm] = parsed.path.rstrip("/")

    def send(self, record: TrafficRecord, arm: str, *, intended: float, timeout: float,
             model: str | None = None, headers: dict[str, str] | None = None) -> ArmResult:
        base = result_base(record, arm)
        acc = StreamAccumulator()
        status = None
        body = json.dumps(streaming_body(record, model)).encode()
        remaining = max(intended + timeout - time.perf_counter(), 0.001)
        try:
            with Timeout(remaining):
                response = self.clients[arm].request(
                    "POST", self.prefix[arm] + record.endpoint, body=body,
                    headers={**HEADERS, **(headers or {})})
                try:
                    status = response.status_code
                    if status >= 400:
                        return failure(base, status, error_message(response.read(), status),
                                       acc, intended)
                    while not acc.done:
                        line = response.readline(b"\n")
                        if not line:
                            break
                        payload = sse_payloads(line.decode("utf-8").strip())
                        if payload is not None:
                            acc.feed_payload(payload, time.perf_counter() - intended)
                    response.read()  # drain the chunked trailer so the connection is reused
                finally:
                    response.release()
        except Timeout:
            return failure(base, status, f"timeout after {timeout}s", acc, intended)
        except ConnectionError as exc:
            return failure(base, status, f"connection failed: {exc}", acc, intended)
        except Exception as exc:  # StreamError, and geventhttpclient's parse / closed errors
            return failure(base, status, f"{type(exc).__name__}: {exc}", acc, intended)
        return finish(base, status, acc, intended)

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
