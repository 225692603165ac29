"""The settings of a run that sends traffic to arms, each declared once with one help and
one default: `RunSettings`, the fields `replay` and `capacity` share (`ReplayConfig` and
`CapacityConfig` inherit it, so their manifests and states keep every setting at the top
level), and the fields other senders take one by one (`determinism`: the timeout, the
progress bar, logprobs and the tokenizer)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters.errors import UsageError


class ConfigError(UsageError, ValueError):
    """A run's configuration that cannot run; the message names the option."""


def timeout_field() -> Any:
    """`timeout`: 120 s, room for a long answer, since a timed-out request is an error."""
    return field(default=120.0, metadata={
        "help": "Seconds from the intended send until the whole answer must be in (else the "
                "request is an error).", "min": 0, "min_open": True})


def progress_field() -> Any:
    return field(default=True, metadata={
        "help": "Show a progress bar (--no-progress for logs and CI)."})


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


@dataclass(frozen=True)
class RunSettings:
    """What every run that replays traffic to its arms is given: where it goes, what it
    sends, how long an answer may take, who sends it, and its live metrics."""

    out: Path = field(metadata={
        "help": "Directory of the run: created, or gone on with under --resume."})
    arms: dict[str, str] = field(metadata={"help": "arm name -> OpenAI-compatible base URL"})
    traffic: Path | None = field(default=None, metadata={
        "help": "JSONL traffic file to send (docs/FORMATS.md)."})
    scenario: str | None = field(default=None, metadata={
        "help": "A bundled mix by name (e.g. saas-mix; `layergate scenarios` lists them) or "
                "a mix YAML path, instead of --traffic."})
    models: dict[str, str] = field(default_factory=dict,
                                   metadata={"help": "arm -> model name to put in the body"})
    resume: bool = field(default=False, metadata={
        "help": "Start or go on: go on with the run in --out where it stopped, or start one "
                "where --out holds none (then --traffic or --scenario is needed). What a "
                "resume sends again: the command's help."})
    timeout: float = timeout_field()
    processes: int = field(default=1, metadata={
        "help": "Locust worker processes on this machine. They get their work from Locust's "
                "master over its messages, like workers on other hosts (replay: 0 sends "
                "through --expect-workers' only; a capacity step needs 1 or more).",
        "min": 0})
    preflight_timeout: float = field(default=10.0, metadata={
        "help": "Before sending, check that every arm answers GET /v1/models within S "
                "seconds; an arm that does not is an error (exit 4) and nothing is sent. "
                "0: no check.", "min": 0})
    # the open loop's cap, above what the arms hold: reaching it means the generator, not
    # the arm, held requests back, so it counts as saturation (a capacity step fails on it)
    max_in_flight: int = field(default=256, metadata={
        "help": "Open loop: Locust users, i.e. requests in flight at once (each to every "
                "arm); reaching it counts as saturation.", "min": 1})
    metrics_port: int | None = field(default=None, metadata={
        "help": "Serve live Prometheus metrics on port P: a replay's layergate_replay_*, a "
                "capacity sweep's step and capacity figures so far "
                "(layergate_capacity_step_*, layergate_run_capacity*).", "min": 1,
        "max": 65535})
    metrics_linger_s: float = field(default=15.0, metadata={
        "help": "With --metrics-port: keep serving the metrics S seconds after the run, so "
                "Prometheus scrapes the final figures (one scrape interval is enough).",
        "min": 0})
    bind_host: str = field(default="127.0.0.1", metadata={
        "help": "Address for --metrics-port (and replay's --web-port): 0.0.0.0 inside a "
                "container."})
    progress: bool = progress_field()
    seed: int = field(default=0, metadata={
        "help": "Seed of the scenario's sampling and of the Poisson arrivals (a capacity "
                "sweep: each step's own stream, from the seed and the step's index, and the "
                "resamples)."})

    def __post_init__(self) -> None:
        if (self.traffic is None) == (self.scenario is None) and not self.resume:
            raise ConfigError("give exactly one of traffic (--traffic) or scenario (--scenario)")
        for name in ("timeout", "max_in_flight"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")

    def to_json(self) -> dict[str, Any]:
        """Every setting, paths as text: what a manifest or a sweep's state records."""
        return {key: str(value) if isinstance(value, Path) else value
                for key, value in dataclasses.asdict(self).items()}
