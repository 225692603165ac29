"""What the tests need of a child process beyond harness/processes.py (which starts and stops
them) and harness/stack/engines.py (which starts an engine)."""

from __future__ import annotations

import signal


def interruptible() -> None:
    """`preexec_fn` for a child the test will Ctrl-C: a shell's background job (`cmd &`,
    e.g. `nohup make test &`) inherits SIGINT ignored, and Python then never turns it into
    KeyboardInterrupt. Restoring the default lets the child see Ctrl-C as a user would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
