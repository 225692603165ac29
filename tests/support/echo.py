"""benchmarks/echo_server.py as an arm for tests: an OpenAI-compatible server with no model,
on 127.0.0.1, started by any interpreter that has uvicorn (the suite's, or a fresh venv's)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from harness.processes import free_port

ECHO = Path(__file__).resolve().parents[2] / "benchmarks" / "echo_server.py"


@contextlib.contextmanager
def echo_server(*args: str, python: str = sys.executable, cwd: Path | None = None,
                env: dict[str, str] | None = None) -> Iterator[str]:
    """The server's base URL once it answers; `args` go to echo_server.py."""
    port = free_port()
    proc = subprocess.Popen([python, str(ECHO), "--port", str(port), *args], cwd=cwd, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{url}/health", timeout=1)
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the echo server did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
