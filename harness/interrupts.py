"""Signals that end a run as Ctrl-C does (a scheduler's SIGTERM, `docker stop`, a closed
terminal's SIGHUP): the handler raises KeyboardInterrupt in the main thread, so every
`finally` on the way out runs and the command marks its run interrupted; `--resume`
finishes it.

Python drops an exception raised while it runs a callback whose errors it ignores (the
logging module's lock release after a fork, as a step starts its replay's processes; a
`__del__`), and the run would go on as if no signal had come. So the request is also kept,
and the loops that wait on a run ask `raise_if_interrupted()` as they go."""

from __future__ import annotations

import signal
import threading

_REQUESTED = threading.Event()


def interrupt(signum: int, frame: object) -> None:
    """The handler: keep the request, then raise it."""
    _REQUESTED.set()
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def sigterm_interrupts() -> None:
    """From now on SIGTERM and Ctrl-C raise KeyboardInterrupt and are kept (in the main
    thread only: a command run from another thread, as a test's, keeps the handlers it had).
    A request kept from an earlier command in the same process is forgotten."""
    if threading.current_thread() is threading.main_thread():
        _REQUESTED.clear()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, interrupt)


def raise_if_interrupted() -> None:
    """Raise the KeyboardInterrupt a signal asked for, where Python dropped it."""
    if _REQUESTED.is_set():
        raise KeyboardInterrupt("a signal asked the run to stop")
