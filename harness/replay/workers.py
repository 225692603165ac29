"""How a Locust worker of a replay is started: the same command for the `--processes`
workers the runner starts next to the master and for `layergate replay-worker` on another
host. A worker gets its plan and its records from the master (`channel.py`): its command
and environment carry no plan and no run directory."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from layergate.harness.replay.channel import parse_address
from layergate.harness.replay.work import PLAN_ENV

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
NAME_ENV = "LAYERGATE_WORKER_NAME"  # read by the locustfile
PROCESSES_ENV = "LAYERGATE_WORKER_PROCESSES"


def worker_command(host: str, port: int, processes: int = 1) -> list[str]:
    cmd = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker",
           "--master-host", host, "--master-port", str(port), "--loglevel", "WARNING"]
    if processes > 1:
        cmd += ["--processes", str(processes)]
    return cmd


def worker_env(environ: Mapping[str, str], name: str | None, processes: int = 1
               ) -> dict[str, str]:
    env = {k: v for k, v in environ.items() if k != PLAN_ENV}
    env.pop(NAME_ENV, None)
    if name:
        env[NAME_ENV] = name
    env[PROCESSES_ENV] = str(processes)
    return env


def connect_host(bind_host: str) -> str:
    """Where a worker on the master's own host reaches a master bound to `bind_host`."""
    return "127.0.0.1" if bind_host in ("0.0.0.0", "", "*") else bind_host




@dataclass(frozen=True)
class WorkerConfig:
    """`layergate replay-worker`: a worker that joins a replay's master on another host."""

    master: str = field(metadata={
        "help": "HOST[:PORT] of the replay's Locust master (its --master-bind; port default "
                "5557)."})
    name: str | None = field(default=None, metadata={
        "help": "This worker's name in the run (results, manifest). Default: host:pid. "
                "The master refuses a name a connected worker already has."})
    processes: int = field(default=1, metadata={
        "help": "Locust worker processes to run on this host (each joins the master).",
        "min": 1})
    worker_token_file: Path | None = field(default=None, metadata={
        "help": "A file holding the run's worker token (the master's --worker-token-file; "
                "or set $LAYERGATE_WORKER_TOKEN). A master with a token refuses a worker "
                "without it."})

    def __post_init__(self) -> None:
        from layergate.harness.replay.config import ConfigError  # not a Locust worker's import

        try:
            parse_address(self.master, "--master")
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        if self.processes < 1:
            raise ConfigError(f"processes must be > 0, got {self.processes}")

    def command(self) -> list[str]:
        host, port = parse_address(self.master, "--master")
        return worker_command(host, port, self.processes)
