"""A SIGTERM that Python drops still stops the run: the handler's KeyboardInterrupt is lost
where it lands in a callback whose errors Python ignores (seen: the logging module's lock
release after a fork, as a capacity step started its replay, and the sweep ran to its end),
so the request is kept and the run's loops raise it (harness/interrupts.py). Each case runs
in a child process: the handlers are the process's."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, signal
    from layergate.harness.interrupts import raise_if_interrupted, sigterm_interrupts

    class Dropping:
        def __del__(self):  # an exception raised here is printed and dropped
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(10_000))  # the handler runs here, between bytecodes

    sigterm_interrupts()
    Dropping()
    print("went on")
    try:
        raise_if_interrupted()
    except KeyboardInterrupt as exc:
        print("stopped:", exc)
""")


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)],
                          capture_output=True, text=True, timeout=60)


def test_a_dropped_sigterm_is_raised_where_the_run_asks() -> None:
    done = _run(SCRIPT)
    assert "KeyboardInterrupt" in done.stderr and "Exception ignored" in done.stderr, done
    assert done.stdout.splitlines() == ["went on", "stopped: a signal asked the run to stop"]


def test_a_new_command_forgets_an_earlier_request() -> None:
    """A command run again in the same process (as a test's) starts with no request."""
    done = _run("""
        import signal
        from layergate.harness.interrupts import (interrupt, raise_if_interrupted,
                                                  sigterm_interrupts)
        try:
            interrupt(signal.SIGTERM, None)  # an earlier command, interrupted
        except KeyboardInterrupt:
            pass
        sigterm_interrupts()
        raise_if_interrupted()
        print("went on")
    """)
    assert done.stdout.strip() == "went on", done
