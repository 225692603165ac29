"""Each peer in a venv of its own, never a dependency of layergate: made once under the
suite's cache (`$LAYERGATE_CACHE/peers/<tool>-<version>`, default `~/.cache/layergate`), so
every clone shares it, from the adapter's `INSTALL` (pip argument lists, in order) and its
`prepare(venv)` when it has one. A venv is ready when its stamp holds the digest of its
recipe; a changed recipe or a half-made venv is made again from scratch."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

STAMP = ".layergate-peer"


def cache_dir() -> Path:
    return Path(os.environ.get("LAYERGATE_CACHE", Path.home() / ".cache" / "layergate")) / "peers"


def _digest(adapter: ModuleType) -> str:
    return hashlib.sha256(json.dumps(adapter.INSTALL).encode()).hexdigest()[:16]


def venv_path(adapter: ModuleType) -> Path:
    return cache_dir() / f"{adapter.TOOL}-{adapter.VERSION}"


def ready(adapter: ModuleType) -> bool:
    """Whether the adapter's venv is made, from its current recipe."""
    stamp = venv_path(adapter) / STAMP
    return stamp.is_file() and stamp.read_text() == _digest(adapter)


def ensure(adapter: ModuleType, log=print) -> Path:
    """The adapter's venv, made (under a lock, so two runs never build it at once) when it
    is missing or its recipe changed."""
    venv = venv_path(adapter)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready(adapter):
            return venv
        log(f"installing {adapter.TOOL} {adapter.VERSION} into {venv} (once)")
        shutil.rmtree(venv, ignore_errors=True)
        # the base interpreter: a venv made from inside another links to that one's
        subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv",
                        str(venv)], check=True)
        for args in adapter.INSTALL:
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *args], check=True)
        if hasattr(adapter, "prepare"):
            adapter.prepare(venv)
        (venv / STAMP).write_text(_digest(adapter))
    return venv


if __name__ == "__main__":
    # `python -m benchmarks.peers.venvs vllm_bench ...`: make those adapters' venvs (`make
    # install` makes vLLM's, which the suite serves as an arm)
    import importlib

    for name in sys.argv[1:]:
        print(ensure(importlib.import_module(f"benchmarks.peers.{name}")))
