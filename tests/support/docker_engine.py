"""A Docker daemon of the test's own: Debian's `dockerd` with its data root, exec root, pid
file and unix socket in a temporary directory (`--iptables=false --bridge=none`: no firewall
or bridge changes), stopped and removed afterwards. Nothing here talks to any other daemon:
every client call names this socket.

The storage driver is overlay2 where the kernel lets this user mount overlays, else vfs.
On vfs every layer and every container is a full copy of its image: the compose stack's
data root peaks at about 24 GB, and creating and removing those copies is most of the
stack test's time on a slow disk."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

# Debian's docker.io client matches its daemon (another `docker` may come first on PATH)
CLIENTS = ("/usr/bin/docker", "docker")
STORAGE_DRIVERS = ("overlay2", "vfs")  # the first this daemon starts with


class DockerUnavailable(RuntimeError):
    """dockerd, docker or docker-compose is missing, or the daemon does not start."""


def _tool(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise DockerUnavailable(f"{names[-1]} is not installed: run `make install` (it installs "
                            "Debian's docker.io and docker-compose packages)")


class DockerCommandError(RuntimeError):
    """A docker / docker-compose command failed; the message holds its output."""


@dataclass
class DockerEngine:
    root: Path  # the temporary directory that holds everything of this daemon
    proc: subprocess.Popen

    @property
    def host(self) -> str:
        return f"unix://{self.root / 'docker.sock'}"

    @property
    def env(self) -> dict[str, str]:
        """The environment for clients: this daemon only, no user config, no BuildKit
        (the classic builder is what docker.io's daemon has without plugins)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "COMPOSE_"))}
        return {**env, "DOCKER_HOST": self.host, "DOCKER_CONFIG": str(self.root / "client"),
                "DOCKER_BUILDKIT": "0"}

    def docker(self, *args: str, check: bool = True, timeout: float = 1200,
               stdin: bytes | None = None, **kw) -> subprocess.CompletedProcess:
        return self.run([_tool(*CLIENTS), *args], check=check, timeout=timeout, stdin=stdin, **kw)

    def run(self, cmd: Sequence[str], check: bool = True, timeout: float = 1200,
            stdin: bytes | None = None, **kw) -> subprocess.CompletedProcess:
        """A client command against this daemon; a failure raises with its output."""
        done = subprocess.run(list(cmd), env=self.env, input=stdin, capture_output=True,
                              timeout=timeout, **kw)
        if check and done.returncode != 0:
            raise DockerCommandError(f"{' '.join(cmd)}\nexit {done.returncode}\n"
                                     f"{done.stdout.decode(errors='replace')[-3000:]}\n"
                                     f"{done.stderr.decode(errors='replace')[-5000:]}")
        return done

    @property
    def driver(self) -> str:
        """The storage driver this daemon runs on."""
        return self.docker("info", "--format", "{{.Driver}}").stdout.decode().strip()

    def log(self) -> str:
        return (self.root / "dockerd.log").read_text(errors="replace")


@contextlib.contextmanager
def docker_engine(timeout: float = 60) -> Iterator[DockerEngine]:
    dockerd = _tool("dockerd")
    _tool(*CLIENTS)
    engine = None
    try:
        for driver in STORAGE_DRIVERS:
            engine = _start(dockerd, driver, timeout)
            if engine.proc.poll() is None:
                break
            _stop(engine)  # this driver is not available here: the daemon exited
        if engine.proc.poll() is not None:
            raise DockerUnavailable(f"dockerd did not start:\n{engine.log()[-3000:]}")
        yield engine
    finally:
        if engine is not None:
            _stop(engine)


def _start(dockerd: str, driver: str, timeout: float) -> DockerEngine:
    """A daemon on `driver`, answering; or one that has exited (its log says why)."""
    root = Path(tempfile.mkdtemp(prefix="layergate-dockerd-"))
    (root / "client").mkdir()
    cmd = [dockerd, "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
           "--pidfile", str(root / "dockerd.pid"), "-H", f"unix://{root / 'docker.sock'}",
           "--storage-driver", driver, "--iptables=false", "--ip6tables=false",
           "--bridge=none"]
    with (root / "dockerd.log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    engine = DockerEngine(root, proc)
    deadline = time.monotonic() + timeout
    while engine.docker("version", check=False, timeout=30).returncode != 0:
        if proc.poll() is not None:
            return engine
        if time.monotonic() > deadline:
            _stop(engine)
            raise DockerUnavailable(f"dockerd did not start:\n{engine.log()[-3000:]}")
        time.sleep(0.5)
    return engine


def _stop(engine: DockerEngine) -> None:
    """Stop every container of this daemon, then the daemon (and its containerd), then
    remove its directory (root-owned layers and containers)."""
    if engine.proc.poll() is None:
        ids = engine.docker("ps", "-aq", check=False, timeout=60).stdout.split()
        if ids:
            engine.docker("rm", "-f", *[i.decode() for i in ids], check=False, timeout=300)
        engine.proc.send_signal(signal.SIGTERM)
        try:
            engine.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(engine.proc.pid, signal.SIGKILL)
            engine.proc.wait(10)
    # the daemon leaves its network namespace mounted under its exec root
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(str(engine.root))), reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)
    # gigabytes of image layers: removed by a process of their own, so the suite goes on
    # while the disk catches up (the name is no longer the daemon's: nothing reuses it)
    if not engine.root.exists():
        return  # stopped before
    doomed = engine.root.with_name(f"{engine.root.name}.removed")
    engine.root.rename(doomed)
    subprocess.Popen(["rm", "-rf", str(doomed)], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
