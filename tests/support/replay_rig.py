"""A replay's master and its workers as separate processes, each worker in its own empty
temporary directory, against the echo server of benchmarks/ as every arm: the rig of the
distributed and reliability tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from layergate.harness.processes import ManagedProcess, layergate_command
from layergate.harness.rundir import RunDir, load_run
from tests.support.echo import echo_server
from tests.support.echo import start_echo as start_echo_server

TOKEN_DELAY_S = 0.05  # 4 tokens: a request takes ~0.2 s, so a worker holds some in flight


def start_echo(port: int, token_delay: float = TOKEN_DELAY_S) -> ManagedProcess:
    """The rig's echo server on a given `port` (one a test stops and starts again), once it
    answers."""
    return start_echo_server(port, "--token-delay", str(token_delay))


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    with echo_server("--token-delay", str(TOKEN_DELAY_S)) as url:
        yield url


def master_cmd(traffic_path: Path | None, out: Path, arms: str, port: int, workers: int,
               *extra: str) -> list[str]:
    source = ["--traffic", str(traffic_path)] if traffic_path else ["--resume"]
    return layergate_command("replay", *source, "--baseline", arms, "--candidate", arms,
                             "--out", str(out), "--processes", "0", "--expect-workers",
                             str(workers), "--master-bind", f"127.0.0.1:{port}", "--no-progress",
                             "--timeout", "20", "--worker-wait", "60", *extra)


class Worker:
    """`layergate replay-worker` in its own empty directory (it becomes the Locust worker:
    same pid)."""

    def __init__(self, home: Path, port: int, name: str | None = None,
                 env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> None:
        self.home = home
        home.mkdir()
        args = ("replay-worker", "--master", f"127.0.0.1:{port}", *args)
        if name:
            args += ("--name", name)
        self.proc = subprocess.Popen(layergate_command(*args), cwd=home, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})})

    def open_paths(self) -> list[str]:
        """Where this process's file descriptors point, and its working directory."""
        fds = Path(f"/proc/{self.proc.pid}/fd")
        paths = [os.readlink(f"/proc/{self.proc.pid}/cwd")]
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                paths.append(os.readlink(fd))
        return paths

    def maps(self) -> str:
        return Path(f"/proc/{self.proc.pid}/maps").read_text()

    def finish(self, timeout: float = 60) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.communicate(timeout=timeout)[0]
        self.proc.kill()
        return self.proc.communicate()[0]


def wait_for(predicate, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if predicate():
                return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def rows(out: Path) -> int:
    run = RunDir(out)
    if not run.results_path.exists():
        return 0
    with run.open_store(create=False) as store:
        return store.count()


def joined(out: Path) -> set[str]:
    summary = RunDir(out).read_workers() or {}
    return {w["name"] for w in summary.get("workers", [])}


def pairs(out: Path) -> Counter:
    return Counter((r.request_id, r.arm) for r in load_run(out).results)


def completed(master: subprocess.Popen, workers: dict[str, Worker], out: Path, n_pairs: int):
    """The master's run once it and the workers are done: complete, and every one of the
    n_pairs (request, arm) pairs has exactly one result."""
    output = master.communicate(timeout=120)[0]
    for worker in workers.values():
        worker.finish()
    assert master.returncode == 0, output
    run = load_run(out)
    assert run.manifest.status == "complete"
    assert set(pairs(out).values()) == {1} and len(pairs(out)) == n_pairs
    return run


@contextlib.contextmanager
def family(out: Path) -> Iterator[list[str]]:
    """The three candidates of tests/test_candidates*.py on echo servers, as `replay` options
    writing to `out`: `fast` and `safe` answer as the baselines do, `broken` garbles every
    answer."""
    delay = ("--token-delay", str(TOKEN_DELAY_S))
    with echo_server(*delay) as echo, echo_server(*delay, "--garble") as garbled:
        yield ["--baseline", echo, "--baseline2", echo, "--candidate", f"fast={echo}",
               "--candidate", f"safe={echo}", "--candidate", f"broken={garbled}",
               "--out", str(out), "--no-progress", "--timeout", "20"]
