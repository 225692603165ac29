"""harness/processes.py's `run_captured` (the watch's hook commands), with real children."""

from __future__ import annotations

import os
import time
from pathlib import Path

from layergate.harness.processes import run_captured


def test_a_command_runs_to_its_end_with_its_output_and_code() -> None:
    got = run_captured(["sh", "-c", 'echo "out $X"; echo err >&2; exit 3'], 10,
                       env={**os.environ, "X": "set"})
    assert got.returncode == 3 and got.output.split() == ["out", "set", "err"]


def test_a_timeout_kills_what_the_command_started_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    start = time.monotonic()
    got = run_captured(["sh", "-c", f"echo begun; sleep 60 & echo $! > {pid_file}; wait"],
                       0.5)
    assert got.returncode is None and got.output == "begun\n"
    assert time.monotonic() - start < 30
    pid = int(pid_file.read_text())
    for _ in range(50):  # killed with its group (a zombie until init reaps it)
        if _gone(pid):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the command's child {pid} outlived the timeout")


def _gone(pid: int) -> bool:
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
