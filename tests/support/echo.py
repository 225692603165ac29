"""The echo server of benchmarks/ (an OpenAI-compatible server with no model) on a free
127.0.0.1 port, for replay tests that need real arms but no engine."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support.processes import free_port

ECHO = Path(__file__).resolve().parents[2] / "benchmarks" / "echo_server.py"


@contextlib.contextmanager
def echo_server(token_delay_s: float = 0.0) -> Iterator[str]:
    """Its base URL once it answers; `token_delay_s` between streamed tokens."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ECHO), "--port", str(port),
                             "--token-delay", str(token_delay_s)])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{url}/health", timeout=1)
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the echo server did not start on {url}")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
