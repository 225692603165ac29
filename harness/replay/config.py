"""`ReplayConfig`: the whole configuration of a shadow replay, recorded in its manifest."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exporters import tokenizer
from exporters.catalogue import ARMS, REQUIRED_ARMS


class ConfigError(ValueError):
    pass


def logprobs_field() -> Any:
    """`logprobs`: a setting of every command that sends requests (replay, determinism)."""
    return field(default=0, metadata={
        "help": "Ask every arm for the top-K logprobs of each token: token KL needs them, and "
                "they count the tokens of servers that send no usage. 0: as the traffic asks. "
                "A server that refuses them is asked again without.", "min": 0})


def tokenizer_field() -> Any:
    """`tokenizer`: a setting of every command that sends requests (replay, determinism)."""
    return field(default=None, metadata={
        "help": "A tokenizer.json (or a directory holding one, or a model name already in the "
                "Hugging Face cache) that counts the tokens of answers without usage or "
                "logprobs. Default: the arm's model name when found there; else such answers "
                "are counted in characters, and figures per token leave them out."})


def check_tokenizer(spec: str | None) -> None:
    """A ConfigError when a named tokenizer cannot be found or read."""
    if spec is None:
        return
    try:
        tokenizer.find(spec)
    except tokenizer.TokenizerError as exc:
        raise ConfigError(f"--tokenizer: {exc}") from exc


@dataclass(frozen=True)
class ReplayConfig:
    out: Path = field(metadata={
        "help": "Run directory to create (or to start or fill with --resume)."})
    arms: dict[str, str] = field(metadata={"help": "arm name -> OpenAI-compatible base URL"})
    traffic: Path | None = field(default=None, metadata={
        "help": "JSONL traffic file to replay (docs/FORMATS.md)."})
    scenario: str | None = field(default=None, metadata={
        "help": "A mix from scenarios/mixes (e.g. saas-mix) or a mix YAML path."})
    rate: float | None = field(default=None, metadata={
        "help": "Open loop: Poisson arrivals at R requests/s instead of the recorded times.",
        "min": 0, "min_open": True})
    users: int | None = field(default=None, metadata={
        "help": "Closed loop: N users, each sending its next record when the last is done.",
        "min": 1})
    requests: int | None = field(default=None, metadata={
        "help": "Send only the first N records.", "min": 1})
    speed: float = field(default=1.0, metadata={
        "help": "Timestamp replay: divide recorded offsets by S.", "min": 0, "min_open": True})
    processes: int = field(default=1, metadata={
        "help": "Locust worker processes (master + N workers when N > 1).", "min": 1})
    resume: bool = field(default=False, metadata={
        "help": "Start or resume: fill the run in --out (send only the (request, arm) "
                "pairs with no ok result), leave it alone when complete with no error rows, "
                "start a run where --out holds none (then --traffic or --scenario is "
                "needed)."})
    timeout: float = field(default=120.0, metadata={
        "help": "Seconds from the intended send until the whole answer must be in (else the "
                "request counts as an error).", "min": 0, "min_open": True})
    metrics_port: int | None = field(default=None, metadata={
        "help": "Serve live layergate_replay_* Prometheus metrics on port P.", "min": 1,
        "max": 65535})
    web_port: int | None = field(default=None, metadata={
        "help": "Run Locust with its web UI on port P (default: headless).", "min": 1,
        "max": 65535})
    metrics_linger_s: float = field(default=15.0, metadata={
        "help": "With --metrics-port: keep serving the live metrics S seconds after the run, "
                "so Prometheus scrapes the final counts (one scrape interval is enough).",
        "min": 0})
    bind_host: str = field(default="127.0.0.1", metadata={
        "help": "Address for --metrics-port and --web-port (0.0.0.0 inside a container)."})
    models: dict[str, str] = field(default_factory=dict,
                                   metadata={"help": "arm -> model name to put in the body"})
    max_in_flight: int = field(default=32, metadata={
        "help": "Open loop: Locust users, i.e. records in flight at once (each to every arm).",
        "min": 1})
    seed: int = field(default=0, metadata={
        "help": "Seed for scenario sampling and Poisson arrivals."})
    skip_invalid: bool = field(default=False, metadata={
        "help": "Skip bad traffic lines (each is reported) instead of stopping."})
    progress: bool = field(default=True, metadata={
        "help": "Show a progress bar (--no-progress for logs and CI)."})
    logprobs: int = logprobs_field()
    tokenizer: str | None = tokenizer_field()

    def __post_init__(self) -> None:
        check_tokenizer(self.tokenizer)
        if (self.traffic is None) == (self.scenario is None) and not self.resume:
            raise ConfigError("give exactly one of traffic (--traffic) or scenario (--scenario)")
        for name in REQUIRED_ARMS:
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
