"""Locust's processes measured from inside: a `sitecustomize` module put first on the
PYTHONPATH the replay's Locust master and workers inherit, so that each writes, as it exits,
its own CPU seconds (`<role>-<pid>.cpu`) and, when asked, its cProfile
(`<role>-<pid>.prof`, timed in CPU seconds so a waiting greenlet costs nothing). Nothing in
harness/ knows of it; processes that are not Locust's are left alone."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DIR_ENV = "LAYERGATE_BENCH_PROBE_DIR"
PROFILE_ENV = "LAYERGATE_BENCH_PROBE_PROFILE"
SITECUSTOMIZE = f'''
import atexit, os, sys, time
_dir = os.environ.get("{DIR_ENV}")
if _dir and "locust" in " ".join(sys.argv):  # `-m locust -f .../locustfile.py ...`
    _name = ("master" if "--master" in sys.argv else "worker") + f"-{{os.getpid()}}"
    _prof = None
    if os.environ.get("{PROFILE_ENV}"):
        import cProfile
        _prof = cProfile.Profile(time.process_time)
        _prof.enable()

    def _write():
        if _prof is not None:
            _prof.disable()
            _prof.dump_stats(os.path.join(_dir, _name + ".prof"))
        t = os.times()
        with open(os.path.join(_dir, _name + ".cpu"), "w") as f:
            f.write(repr(t.user + t.system))

    atexit.register(_write)
'''


@dataclass(frozen=True)
class LocustCpu:
    """CPU seconds of one replay's Locust processes, as each counted its own."""

    master: float
    workers: float
    processes: int  # how many wrote their figure


class Probe:
    """Where the processes write; `take()` reads and clears what the last replay left."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def take(self) -> LocustCpu:
        cpu = {"master": 0.0, "worker": 0.0}
        files = sorted(self.path.glob("*.cpu"))
        for f in files:
            cpu[f.name.split("-")[0]] += float(f.read_text())
            f.unlink()
        return LocustCpu(cpu["master"], cpu["worker"], len(files))

    def profiles(self) -> list[Path]:
        return sorted(self.path.glob("*.prof"))


@contextlib.contextmanager
def probed(profile: bool = False, out: Path | None = None) -> Iterator[Probe]:
    """Every Locust process started inside the block writes its CPU (and with `profile`
    its cProfile) under `out` (a temporary directory when None)."""
    with tempfile.TemporaryDirectory(prefix="layergate-probe-") as site:
        (Path(site) / "sitecustomize.py").write_text(SITECUSTOMIZE)
        where = out or Path(site) / "out"
        where.mkdir(parents=True, exist_ok=True)
        saved = {k: os.environ.get(k) for k in ("PYTHONPATH", DIR_ENV, PROFILE_ENV)}
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [site, *filter(None, (saved["PYTHONPATH"] or "").split(os.pathsep))])
        os.environ[DIR_ENV] = str(where)
        if profile:
            os.environ[PROFILE_ENV] = "1"
        try:
            yield Probe(where)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
