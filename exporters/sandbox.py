"""Running a reference's test command on an output (the `command` kind; off unless the
scorer is told `allow_commands=True`). What it does: a fresh temporary directory as the
working directory and HOME, removed afterwards; the output written to a file there and
given on stdin; a wall-clock timeout that kills the command's whole process group;
`resource.setrlimit` on CPU seconds, address space, file size, open files and core dumps;
an environment of PATH, HOME, LANG and TMPDIR only, with the proxy variables pointed at a
closed port. What it does not: it is not a container. The command runs as this user, can
read (and write) whatever this user can outside the directory, and can open network
connections itself (the proxy variables stop only clients that honour them). Run only
references you trust, or run the scorer inside a container (docs/FORMATS.md,
"References")."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens on it


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0
    memory_mb: int = 1024
    file_mb: int = 16
    open_files: int = 64


@dataclass(frozen=True)
class Outcome:
    passed: bool
    returncode: int | None  # None: killed at the timeout
    stdout: str = ""
    stderr: str = ""


def _limit(limits: Limits):
    def apply() -> None:
        cpu = max(1, int(limits.timeout_s + 1))
        mib = 1024 * 1024
        for which, value in ((resource.RLIMIT_CPU, cpu),
                             (resource.RLIMIT_AS, limits.memory_mb * mib),
                             (resource.RLIMIT_FSIZE, limits.file_mb * mib),
                             (resource.RLIMIT_NOFILE, limits.open_files),
                             (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(which, (value, value))
    return apply


def run_command(argv: Sequence[str], output: str, *, output_file: str,
                files: Mapping[str, str], limits: Limits) -> Outcome:
    """Run `argv` in a fresh directory holding `files` and the output as `output_file`,
    with the output on stdin; passed when it exits 0 within the timeout."""
    with tempfile.TemporaryDirectory(prefix="layergate-command-") as tmp:
        root = Path(tmp)
        for name, text in {**files, output_file: output}.items():
            (root / name).write_text(text, encoding="utf-8")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "TMPDIR": tmp,
               "LANG": "C.UTF-8", "no_proxy": "", "NO_PROXY": ""}
        for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY",
                     "ALL_PROXY"):
            env[name] = DEAD_PROXY
        child = subprocess.Popen(list(argv), cwd=tmp, env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, preexec_fn=_limit(limits))
        try:
            out, err = child.communicate(output, timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
            return Outcome(False, None, out, err)
        try:
            os.killpg(child.pid, signal.SIGKILL)  # anything it left behind
        except ProcessLookupError:
            pass
        return Outcome(child.returncode == 0, child.returncode, out, err)
