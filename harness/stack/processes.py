"""Child processes the stack owns: each in its own process group, all stopped together.

A child in its own session does not see the terminal's Ctrl-C, so the parent must stop it:
`ProcessSet` does that from `close()`, from `atexit`, and from SIGTERM / SIGHUP handlers
(turned into KeyboardInterrupt so every `finally` on the way out runs).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ManagedProcess:
    name: str
    cmd: tuple[str, ...]
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError as exc:
            return f"(log {self.log_path} unreadable: {exc})"

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM to the whole process group, SIGKILL after `timeout` seconds."""
        self.terminate()
        return self.reap(time.monotonic() + timeout)

    def terminate(self) -> None:
        """SIGTERM to the whole process group, if the leader still runs."""
        if self.popen.poll() is None:
            self._signal_group(signal.SIGTERM)

    def reap(self, deadline: float) -> int | None:
        """Wait for the leader until `deadline` (time.monotonic), then SIGKILL the group."""
        try:
            self.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            self.popen.wait(10)
        # grandchildren (e.g. Locust workers) may outlive the leader: clean the group up
        self._signal_group(signal.SIGKILL)
        return self.popen.returncode

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


class ProcessSet:
    """Starts processes and guarantees they stop: close(), atexit, SIGTERM and SIGHUP."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._procs: list[ManagedProcess] = []
        self._lock = threading.Lock()
        self._previous_handlers: dict[int, object] = {}
        atexit.register(self.close)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                self._previous_handlers[sig] = signal.signal(sig, _raise_interrupt)

    @property
    def processes(self) -> tuple[ManagedProcess, ...]:
        return tuple(self._procs)

    def start(self, name: str, cmd: Sequence[str],
              env: Mapping[str, str] | None = None) -> ManagedProcess:
        log_path = self.log_dir / f"{name}.log"
        with log_path.open("w") as log:
            popen = subprocess.Popen(list(cmd), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     env={**os.environ, **(env or {})})
        proc = ManagedProcess(name, tuple(cmd), popen, log_path)
        with self._lock:
            self._procs.append(proc)
        return proc

    def close(self, timeout: float = 20.0) -> None:
        """Stop every process: SIGTERM to each, newest first (consumers before what they
        consume), then wait for them together, so they shut down side by side rather than
        one after another; SIGKILL to any still running after `timeout` seconds."""
        with self._lock:
            procs, self._procs = list(reversed(self._procs)), []
        for proc in procs:
            proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in procs:
            proc.reap(deadline)
        for sig, handler in self._previous_handlers.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, handler)
        self._previous_handlers = {}
        atexit.unregister(self.close)
