"""layergate's sdist and wheel, built by `make dist` in a copy of the checkout (`build`:
the sdist, then the wheel from that sdist, so the sdist must carry the bundled data too),
once per content of the checkout into the suite's cache, and shared by the tests that
install layergate as a user does (tests/test_wheel.py, the compose stack's image). pip
resolves offline, from the suite's wheelhouse (`offline_env`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.wheelhouse import CACHE, atomic_dir, digest, keep_only, locked, wheels_dir

ROOT = Path(__file__).resolve().parents[2]
# what a copy of the checkout leaves behind: history, environments, build and run outputs
IGNORE = shutil.ignore_patterns(".git", ".venv*", "runs", "build", "dist", "*.egg-info",
                                "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis")


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path


def source_files() -> list[Path]:
    """The checkout's files as git sees them (tracked, and untracked but not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return sorted(ROOT / f for f in listed if f and (ROOT / f).is_file())


def source_digest(files: list[Path] | None = None) -> str:
    """A digest of the files' paths and contents (not their times: a fresh clone hits)."""
    parts: list[bytes] = []
    for path in files if files is not None else source_files():
        parts += [str(path.relative_to(ROOT)).encode(), path.read_bytes()]
    return digest(*parts)


def env() -> dict[str, str]:
    """The environment of a user's build: nothing of the checkout on the path."""
    return {k: v for k, v in os.environ.items()
            if k != "PYTHONPATH" and not k.startswith("LAYERGATE_")}


def offline_env() -> dict[str, str]:
    """A user's environment, with pip resolving from the suite's wheelhouse instead of the
    index (the same requirements; this machine reaches no index from a test)."""
    return {**env(), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels_dir()),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_COMPILE": "1"}


def built() -> Dist:
    """The sdist and the wheel of the checkout as it is now."""
    key = source_digest([p for p in source_files() if not p.is_relative_to(ROOT / "tests")])
    final = CACHE / f"dist-{key}"
    with locked("dist"):
        if not final.is_dir():
            _build(final)
    return Dist(next(final.glob("layergate-*.tar.gz")), next(final.glob("layergate-*.whl")))


def _build(final: Path) -> None:
    work = atomic_dir(final)
    try:
        src = work / "src"
        shutil.copytree(ROOT, src, symlinks=True, ignore=IGNORE)
        _checked(["make", "-C", str(src), "dist", f"PY={sys.executable}"], work)
        (src / "dist").replace(final)
        keep_only("dist-*", final)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _checked(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, env=offline_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd} exited {done.returncode}:\n{done.stdout[-3000:]}"
                           f"\n{done.stderr[-3000:]}")
