"""The images of the compose stack test, built here because none can be pulled, and cached
between runs in the suite's cache (tests/support/wheelhouse.py; each file keyed by a hash
of its inputs, so a warm run loads instead of building):

- `layergate-test/debian-python:bookworm`: Debian bookworm by `debootstrap` (minbase with
  python3, python3-venv, ca-certificates), `docker import`ed once; cached as the rootfs
  tarball and as the imported image (`docker save`), so its id is the same in every run.
- `layergate-test/prometheus:debian`: that base with Debian's `prometheus` package
  (tests/support/images/prometheus.Dockerfile); cached as a `docker save` tarball.
- `layergate:local`: the starter's own Dockerfile (the one `layergate init` writes, the
  repository's with layergate installed from the starter's wheels/), built in the starter
  with BASE_IMAGE = the Debian base and PIP_SOURCE = "--no-index --find-links
  http://127.0.0.1:P/": the suite's wheelhouse, served on loopback to a `--network host`
  build; cached as a `docker save` tarball. A change to the code rebuilds it with the
  previous image as layer cache (`--cache-from`), so only the steps from the starter's
  copy on run again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.docker_engine import DockerEngine
from tests.support.http_server import serving
from tests.support.wheelhouse import CACHE, atomic_dir, digest, keep_only, wheels_dir

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates")
BASE_IMAGE = "layergate-test/debian-python:bookworm"
PROMETHEUS_IMAGE = "layergate-test/prometheus:debian"
LAYERGATE_IMAGE = "layergate:local"
PROMETHEUS_DOCKERFILE = Path(__file__).with_name("images") / "prometheus.Dockerfile"


def _files_digest(root: Path) -> str:
    """The build context's paths and contents (not their times)."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def base_rootfs_tar() -> Path:
    """The debootstrapped rootfs as a tarball (debootstrap runs once per machine)."""
    key = digest(SUITE, MIRROR, *BASE_PACKAGES)
    tar = CACHE / f"base-{SUITE}-{key}.tar"
    if tar.is_file():
        return tar
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed: run `make install`")
    work = atomic_dir(tar)
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
        keep_only("base-*.tar", tar)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tar


@contextlib.contextmanager
def serve_wheels(directory: Path) -> Iterator[str]:
    """The wheel directory over HTTP on 127.0.0.1 (a pip --find-links URL) for a build, on
    the port of the last build when it is free: the URL is a build argument, and a changed
    argument misses the layer cache of every step that uses it."""
    last = CACHE / "wheels.port"
    port = int(last.read_text()) if last.is_file() else 0
    with serving(functools.partial(_QuietHandler, directory=str(directory)), port) as url:
        last.write_text(url.rsplit(":", 1)[1].strip("/"))
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


def _load_base(engine: DockerEngine, rootfs: Path) -> None:
    """The base image, imported once from the rootfs and then saved: every later load has
    the same image id, so an older `layergate:local` built on it can serve as layer cache."""
    tar = CACHE / f"baseimage-{digest(rootfs.name)}.tar"
    _load_or_build(engine, BASE_IMAGE, tar,
                   lambda: engine.docker("import", str(rootfs), BASE_IMAGE))
    keep_only("baseimage-*.tar", tar)


def ensure_images(engine: DockerEngine, starter: Path) -> dict[str, str]:
    """Load (or build, then cache) the three images into `engine`, layergate's from the
    `starter` directory that `layergate init` wrote; their tags by role."""
    CACHE.mkdir(parents=True, exist_ok=True)
    base = base_rootfs_tar()
    _load_base(engine, base)

    prom_key = digest(base.name, PROMETHEUS_DOCKERFILE.read_bytes())
    prom_tar = CACHE / f"prometheus-{prom_key}.tar"
    images = PROMETHEUS_DOCKERFILE.parent
    _load_or_build(engine, PROMETHEUS_IMAGE, prom_tar, lambda: engine.docker(
        "build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
        "-t", PROMETHEUS_IMAGE, "-f", str(PROMETHEUS_DOCKERFILE), str(images)))
    keep_only("prometheus-*.tar", prom_tar)

    wheels = wheels_dir()
    lg_key = digest(base.name, wheels.name, _files_digest(starter))
    lg_tar = CACHE / f"layergate-{lg_key}.tar"

    def build_layergate() -> None:
        # the last image built (another commit's code) as layer cache: the steps before
        # the source is copied in (the user, the venv, torch) are taken from it
        older = [t for t in CACHE.glob("layergate-*.tar") if t != lg_tar]
        cache_from = []
        if older:
            engine.docker("load", "-i", str(max(older, key=lambda t: t.stat().st_mtime)))
            cache_from = ["--cache-from", LAYERGATE_IMAGE]
        with serve_wheels(wheels) as url:
            engine.docker("build", "--network", "host", "-t", LAYERGATE_IMAGE, *cache_from,
                          "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
                          "--build-arg", f"PIP_SOURCE=--no-index --find-links {url}",
                          str(starter))

    _load_or_build(engine, LAYERGATE_IMAGE, lg_tar, build_layergate)
    keep_only("layergate-*.tar", lg_tar)
    return {"base": BASE_IMAGE, "prometheus": PROMETHEUS_IMAGE, "layergate": LAYERGATE_IMAGE}


def cache_size() -> int:
    """Bytes under the cache directory (docs/TESTING.md reports it)."""
    return sum(p.stat().st_size for p in CACHE.rglob("*") if p.is_file())

