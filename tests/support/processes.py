"""Start real layergate processes for tests: engines over HTTP, on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class EngineProcess:
    url: str
    proc: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def interruptible() -> None:
    """`preexec_fn` for a child the test will Ctrl-C: a shell's background job (`cmd &`,
    e.g. `nohup make test &`) inherits SIGINT ignored, and Python then never turns it into
    KeyboardInterrupt. Restoring the default lets the child see Ctrl-C as a user would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def layergate_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args]


def start_engine(*args: str, threads: int = 1, timeout: float = 180,
                 env: dict[str, str] | None = None) -> EngineProcess:
    """`layergate serve ARGS` on a free port; returns once /health answers 200.

    Fails (never skips) when the engine does not come up, with its log in the message.
    """
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="layergate-engine-", suffix=".log")[1])
    cmd = layergate_cmd("serve", "--host", "127.0.0.1", "--port", str(port),
                        "--threads", str(threads), *args)
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"engine exited with {proc.returncode}: {' '.join(cmd)}\n"
                               f"{log.read_text(errors='replace')[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return EngineProcess(url, proc, log)
        time.sleep(0.5)
    proc.kill()
    raise RuntimeError(f"engine did not become healthy in {timeout}s\n"
                       f"{log.read_text(errors='replace')[-4000:]}")


@contextlib.contextmanager
def engine(*args: str, **kwargs) -> Iterator[EngineProcess]:
    p = start_engine(*args, **kwargs)
    try:
        yield p
    finally:
        p.stop()
