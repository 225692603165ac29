"""Child processes the stack owns (harness/processes.py starts and stops each), all stopped
together: `ProcessSet` does that from `close()`, from `atexit`, and from SIGTERM / SIGHUP
handlers (turned into KeyboardInterrupt so every `finally` on the way out runs).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from layergate.harness.interrupts import interrupt
from layergate.harness.processes import ManagedProcess, spawn


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
                self._previous_handlers[sig] = signal.signal(sig, interrupt)

    @property
    def processes(self) -> tuple[ManagedProcess, ...]:
        return tuple(self._procs)

    def start(self, name: str, cmd: Sequence[str],
              env: Mapping[str, str] | None = None) -> ManagedProcess:
        proc = spawn(name, cmd, self.log_dir / f"{name}.log", env={**os.environ, **(env or {})})
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
