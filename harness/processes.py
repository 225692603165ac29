"""Child processes layergate starts: each in its own session and process group, logged to a
file, and stopped by SIGTERM to the whole group, then SIGKILL. The one supervision of the
replay (Locust's master and workers), the stack (engines, exporter, Prometheus), the
watch's hook commands (`run_captured`) and the tests' and benchmarks' servers.

A child in its own session does not see the terminal's Ctrl-C, so its starter stops it, in
order (the stack's `ProcessSet` does that on exit and on SIGTERM / SIGHUP too).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """A TCP port free on loopback now (the child binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def layergate_command(*args: str) -> list[str]:
    """`layergate ARGS` run by this interpreter, whether or not the script is on PATH."""
    return [sys.executable, "-m", "layergate.harness.cli", *args]


@dataclass(frozen=True)
class ManagedProcess:
    """A started child; `url` is where it answers on HTTP, when it serves."""

    name: str
    cmd: tuple[str, ...]
    popen: subprocess.Popen
    log_path: Path
    url: str | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log()[-chars:]
        except OSError as exc:
            return f"(log {self.log_path} unreadable: {exc})"

    def stop(self, timeout: float = 20.0, sig: int = signal.SIGTERM) -> int | None:
        """`sig` to the whole process group, SIGKILL after `timeout` seconds; its exit code."""
        self.terminate(sig)
        return self.reap(time.monotonic() + timeout)

    def terminate(self, sig: int = signal.SIGTERM) -> None:
        """`sig` to the whole process group, if the leader still runs."""
        if self.popen.poll() is None:
            self._signal_group(sig)

    def reap(self, deadline: float) -> int | None:
        """Wait for the leader until `deadline` (time.monotonic), then SIGKILL the group;
        its exit code."""
        try:
            self.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            self.popen.wait(10)
        # grandchildren may outlive the leader: clean the group up
        self._signal_group(signal.SIGKILL)
        return self.popen.returncode

    def _signal_group(self, sig: int) -> None:
        _signal_group(self.popen.pid, sig)


def spawn(name: str, cmd: Sequence[str], log_path: Path, *,
          env: Mapping[str, str] | None = None, cwd: Path | None = None,
          append: bool = False, die_with_parent: bool = False,
          url: str | None = None) -> ManagedProcess:
    """Start `cmd` in its own session, stdout and stderr into `log_path` (`append`: after
    what is there), with the whole environment `env` (None: this process's).
    `die_with_parent`: the kernel sends it SIGTERM if the thread that started it dies
    without stopping it (Linux)."""
    deathsig = _die_with_parent if die_with_parent and sys.platform == "linux" else None
    with Path(log_path).open("ab" if append else "wb") as log:
        popen = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True,
                                 env=None if env is None else dict(env),
                                 preexec_fn=deathsig)
    return ManagedProcess(name, tuple(cmd), popen, Path(log_path), url)


@dataclass(frozen=True)
class Finished:
    """A child run to its end: its exit code (None: killed at the timeout) and its output."""

    returncode: int | None
    output: str


def run_captured(cmd: Sequence[str], timeout: float, *,
                 env: Mapping[str, str] | None = None) -> Finished:
    """Run `cmd` to its end in its own session, stdout and stderr captured together, with
    the whole environment `env` (None: this process's). Past `timeout` seconds the whole
    group gets SIGKILL, so what the command started stops too."""
    proc = subprocess.Popen(list(cmd), env=None if env is None else dict(env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return Finished(None, out.decode(errors="replace"))
    return Finished(proc.returncode, out.decode(errors="replace"))


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _die_with_parent() -> None:
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
