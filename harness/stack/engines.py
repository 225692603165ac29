"""How the stack starts one arm's reference engine: `layergate serve` with explicit threads;
and `start_engine`, one engine on its own (the tests' and the benchmarks' arms)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from layergate.exporters.catalogue import FULL_DEPTH
from layergate.harness.processes import ManagedProcess, free_port, layergate_command, spawn
from layergate.harness.stack.health import started


def serve_command(port: int, threads: int, *args: str) -> list[str]:
    """`layergate serve ARGS` on 127.0.0.1:`port` with `threads` torch threads."""
    return layergate_command("serve", "--host", "127.0.0.1", "--port", str(port),
                             "--threads", str(threads), *args)


@dataclass(frozen=True)
class EngineSpec:
    """One arm. `url` set means the engine runs elsewhere and the stack only scrapes it."""

    arm: str
    skip_policy: str = FULL_DEPTH
    extra_args: tuple[str, ...] = ()
    threads: int = 1
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def command(self, port: int) -> list[str]:
        return serve_command(port, self.threads, "--skip-policy", self.skip_policy,
                             *self.extra_args)

    def process_env(self) -> dict[str, str]:
        # BLAS / OpenMP pools must not oversubscribe the cores the engines share
        threads = str(self.threads)
        return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **self.env}


def start_engine(*args: str, threads: int = 1, timeout: float = 180,
                 env: dict[str, str] | None = None) -> ManagedProcess:
    """`layergate serve ARGS` on a free port, logged to a temporary file; returned once
    /health answers 200. A StackError with the log when it does not (the process stopped)."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="layergate-engine-", suffix=".log")[1])
    url = f"http://127.0.0.1:{port}"
    proc = spawn("engine", serve_command(port, threads, *args), log,
                 env={**os.environ, **(env or {})}, url=url)
    return started(proc, f"{url}/health", timeout)


@contextmanager
def engine(*args: str, **kwargs) -> Iterator[ManagedProcess]:
    """`start_engine`, stopped when the block exits."""
    proc = start_engine(*args, **kwargs)
    try:
        yield proc
    finally:
        proc.stop()
