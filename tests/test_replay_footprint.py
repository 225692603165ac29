"""A big replay's note on its footprint: the master's peak memory, read from the process
itself, and the store's size."""

from __future__ import annotations

import os
import re
from pathlib import Path

from layergate.harness.replay.runner import _footprint
from layergate.harness.rundir import RunDir


def test_the_footprint_names_the_masters_peak_memory_and_the_store_size(tmp_path: Path):
    run = RunDir(tmp_path / "run")
    with run.open_store() as store:
        store.put_many([])
    note = _footprint(os.getpid(), run)  # this process stands in for Locust's master
    peak = int(re.search(r"replay master peak memory (\d+) MiB", note)[1])
    status = Path(f"/proc/{os.getpid()}/status").read_text()
    hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
    assert 0 < peak <= hwm // 1024  # read first: the peak only grows
    assert re.search(r"store \d+ MiB \(results.sqlite with its WAL\)", note), note
    gone = _footprint(2**22 + 7, run)  # no such process: said so, not a made-up number
    assert "peak memory unknown" in gone
