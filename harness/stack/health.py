"""Wait for a started process to answer on HTTP, failing fast when it dies."""

from __future__ import annotations

import time

from layergate.exporters.errors import InfrastructureError
from layergate.harness.processes import ManagedProcess
from layergate.harness.readiness import why_down


class StackError(InfrastructureError, RuntimeError):
    """A process of the stack did not start or did not become healthy."""


def wait_healthy(proc: ManagedProcess, url: str, timeout: float) -> None:
    """Return once GET `url` shows the process up (harness/readiness.py: any answer but
    502 / 503 / 504); raise StackError (with the log) otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.running():
            raise StackError(f"{proc.name} exited with code {proc.popen.returncode} before "
                             f"{url} answered; log {proc.log_path}:\n{proc.log_tail()}")
        if why_down(url, 2.0) is None:
            return
        time.sleep(0.3)
    raise StackError(f"{proc.name} was not up on {url} within {timeout:.0f}s "
                     "(harness/readiness.py); "
                     f"log {proc.log_path}:\n{proc.log_tail()}")


def started(proc: ManagedProcess, url: str, timeout: float) -> ManagedProcess:
    """`proc` once GET `url` shows it up; when it does not, `proc` is stopped and the
    StackError raised (for a process no `ProcessSet` owns)."""
    try:
        wait_healthy(proc, url, timeout)
    except BaseException:
        proc.stop()
        raise
    return proc
