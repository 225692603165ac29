"""`ReplayConfig`: the whole configuration of a shadow replay, recorded in its manifest."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporters.catalogue import ARMS


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ReplayConfig:
    out: Path = field(metadata={"help": "run directory to write (or resume)"})
    arms: dict[str, str] = field(metadata={"help": "arm name -> OpenAI-compatible base URL"})
    traffic: Path | None = field(default=None, metadata={"help": "JSONL traffic file"})
    scenario: str | None = field(default=None, metadata={"help": "a mix name or YAML path"})
    rate: float | None = field(default=None, metadata={"help": "Poisson arrivals per second"})
    users: int | None = field(default=None, metadata={"help": "closed loop with N users"})
    requests: int | None = field(default=None, metadata={"help": "send only the first N"})
    speed: float = field(default=1.0, metadata={"help": "timestamp replay speed factor"})
    processes: int = field(default=1, metadata={"help": "Locust worker processes"})
    resume: bool = field(default=False, metadata={"help": "send only what is missing"})
    timeout: float = field(default=120.0, metadata={"help": "per-request timeout, seconds"})
    metrics_port: int | None = field(default=None, metadata={"help": "live metrics port"})
    web_port: int | None = field(default=None, metadata={"help": "Locust web UI port"})
    metrics_linger_s: float = field(default=15.0, metadata={
        "help": "keep serving the live metrics this long after the run, so Prometheus scrapes "
                "the final counts (one scrape interval is enough)"})
    bind_host: str = field(default="127.0.0.1", metadata={
        "help": "address the live metrics and the Locust web UI listen on"})
    models: dict[str, str] = field(default_factory=dict,
                                   metadata={"help": "arm -> model name to put in the body"})
    max_in_flight: int = field(default=32, metadata={
        "help": "open loop: Locust users, i.e. records in flight at once (each to every arm)"})
    seed: int = field(default=0, metadata={"help": "seed for sampling and arrivals"})
    skip_invalid: bool = field(default=False, metadata={"help": "skip bad traffic lines"})
    progress: bool = field(default=True, metadata={"help": "show a progress bar"})

    def __post_init__(self) -> None:
        if (self.traffic is None) == (self.scenario is None) and not self.resume:
            raise ConfigError("give exactly one of traffic (--traffic) or scenario (--scenario)")
        for name in ("baseline", "candidate"):
            if name not in self.arms:
                raise ConfigError(f"the {name} arm needs a URL (--{name})")
        unknown = set(self.arms) - set(ARMS)
        if unknown:
            raise ConfigError(f"unknown arm {sorted(unknown)[0]!r}: arms are {', '.join(ARMS)}")
        for arm, url in self.arms.items():
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"--{arm} must be an http(s) URL: {url!r}")
        if self.rate is not None and self.users is not None:
            raise ConfigError("--rate (open loop) and --users (closed loop) exclude each other")
        positive = {"rate": self.rate, "users": self.users, "requests": self.requests,
                    "speed": self.speed, "processes": self.processes, "timeout": self.timeout,
                    "max_in_flight": self.max_in_flight}
        for name, value in positive.items():
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be > 0, got {value}")

    @property
    def closed_loop(self) -> bool:
        return self.users is not None

    @property
    def locust_users(self) -> int:
        """Users to spawn, a multiple of the processes so that every worker gets some."""
        users = self.users if self.users is not None else self.max_in_flight
        return max(users, self.processes) + (-max(users, self.processes)) % self.processes

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("out", "traffic"):
            out[key] = None if out[key] is None else str(out[key])
        return out
