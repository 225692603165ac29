"""tests/support/echo_server.py as an arm for tests and benchmarks: an OpenAI-compatible server
with no model, on 127.0.0.1, started by any interpreter that has uvicorn (the suite's, or a
fresh venv's)."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from layergate.harness.processes import ManagedProcess, free_port, spawn
from layergate.harness.stack.health import started

ECHO = Path(__file__).resolve().parent / "echo_server.py"


def start_echo(port: int, *args: str, python: str = sys.executable, cwd: Path | None = None,
               env: dict[str, str] | None = None) -> ManagedProcess:
    """The server on `port` (a test may stop it and start it again there) once it answers;
    `args` go to echo_server.py."""
    log = Path(tempfile.mkstemp(prefix="layergate-echo-", suffix=".log")[1])
    proc = spawn("echo", [python, str(ECHO), "--port", str(port), *args], log, env=env,
                 cwd=cwd, url=f"http://127.0.0.1:{port}")
    return started(proc, f"{proc.url}/health", timeout=30)


@contextlib.contextmanager
def echo_server(*args: str, python: str = sys.executable, cwd: Path | None = None,
                env: dict[str, str] | None = None) -> Iterator[str]:
    """The server's base URL once it answers; stopped when the block exits."""
    proc = start_echo(free_port(), *args, python=python, cwd=cwd, env=env)
    try:
        yield proc.url
    finally:
        proc.stop(10)
