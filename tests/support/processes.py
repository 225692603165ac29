"""What the tests need of a child process beyond harness/processes.py (which starts and stops
them) and harness/stack/engines.py (which starts an engine)."""

from __future__ import annotations

import signal

from layergate.harness.processes import ManagedProcess


def interruptible() -> None:
    """`preexec_fn` for a child the test will Ctrl-C: a shell's background job (`cmd &`,
    e.g. `nohup make test &`) inherits SIGINT ignored, and Python then never turns it into
    KeyboardInterrupt. Restoring the default lets the child see Ctrl-C as a user would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def died(server: ManagedProcess) -> str | None:
    """How a server process ended (its exit code and its log's tail), None if alive."""
    code = server.popen.poll()
    if code is None:
        return None
    return (f"the {server.name} server at {server.url} died with exit code {code}"
            f"{' (SIGSEGV)' if code in (-11, 139) else ''}; the tail of its log "
            f"({server.log_path}):\n{server.log()[-3000:]}")


def check_alive(servers: list[ManagedProcess]) -> None:
    """Fail loudly, naming each server that has died, its exit code and its log."""
    deaths = [d for d in (died(s) for s in servers) if d]
    if deaths:
        raise AssertionError("\n\n".join(deaths))
