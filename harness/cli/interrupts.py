"""A SIGTERM (from a scheduler, `docker stop`) ends a run as Ctrl-C does: the command's
KeyboardInterrupt handling marks the run interrupted, and `--resume` finishes it."""

from __future__ import annotations

import signal
import threading


def sigterm_interrupts() -> None:
    """From now on a SIGTERM raises KeyboardInterrupt (in the main thread only: a command
    run from another thread, as a test's, keeps the handler it had)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
