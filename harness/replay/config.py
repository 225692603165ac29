"""`ReplayConfig`: the whole configuration of a shadow replay, recorded in its manifest."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from layergate.exporters import tokenizer
from layergate.exporters.catalogue import (
    BASELINE,
    CANDIDATE,
    REFERENCE_ARMS,
    REQUIRED_ARMS,
    candidate_arms,
    check_candidate_name,
)
from layergate.exporters.errors import UsageError
from layergate.harness.replay.channel import parse_address
from layergate.harness.replay.own import CONVERSATION_MODES, OWN, REASONING_BACK, RECORDED


class ConfigError(UsageError, ValueError):
    """A replay configuration that cannot run; the message names the option."""


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
    # arms a run must have; a capacity step sends only to the arms still stepping
    required_arms: ClassVar[tuple[str, ...]] = REQUIRED_ARMS

    out: Path = field(metadata={
        "help": "Run directory to create (or to start or fill with --resume)."})
    arms: dict[str, str] = field(metadata={"help": "arm name -> OpenAI-compatible base URL"})
    traffic: Path | None = field(default=None, metadata={
        "help": "JSONL traffic file to replay (docs/FORMATS.md)."})
    scenario: str | None = field(default=None, metadata={
        "help": "A bundled mix by name (e.g. saas-mix; `layergate scenarios` lists them) or "
                "a mix YAML path."})
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
        "help": "Locust worker processes on this machine. They get their work from Locust's "
                "master over its messages, like workers on other hosts (0: only those).",
        "min": 0})
    expect_workers: int = field(default=0, metadata={
        "help": "Workers on other hosts (`layergate replay-worker --master`) to wait for "
                "before sending, besides --processes.", "min": 0})
    master_bind: str | None = field(default=None, metadata={
        "help": "HOST[:PORT] where Locust's master listens for workers (port default 5557). "
                "Default: 127.0.0.1 on a free port, for --processes only."})
    worker_wait: int = field(default=600, metadata={
        "help": "Seconds to wait for every expected worker before giving up (the run is "
                "then interrupted; 0: wait for ever).", "min": 0})
    worker_token_file: Path | None = field(default=None, metadata={
        "help": "A file holding the secret every worker must hold to join (the same on "
                "each worker: `replay-worker --worker-token-file`, or $LAYERGATE_WORKER_TOKEN "
                "on both sides). Authenticates workers; it does not encrypt the channel."})
    max_clock_skew: float = field(default=30.0, metadata={
        "help": "Refuse a worker whose clock is more than S seconds off the master's; a "
                "smaller offset is measured at its join and corrected.", "min": 0,
        "min_open": True})
    preflight_timeout: float = field(default=10.0, metadata={
        "help": "Before sending, check that every arm answers GET /v1/models within S "
                "seconds; an arm that does not is an error (exit 4) and nothing is sent. "
                "0: no check.", "min": 0})
    breaker: int = field(default=10, metadata={
        "help": "Stop the run (interrupted, exit 4; finish it with --resume) once an arm's "
                "last K requests all failed to connect. 0: never.", "min": 0})
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
    until_decided: Path | None = field(default=None, metadata={
        "help": "Gate policy (a bundled name or a YAML file): judge it as results arrive, "
                "with anytime-valid intervals, and stop sending to a candidate once its "
                "verdict is decided (the others go on), and the run once every candidate's "
                "is (or at --budget: inconclusive). `layergate gate --sequential` on the "
                "run gives the verdicts."})
    conversation_mode: str = field(default=RECORDED, metadata={
        "help": "How a conversation's later turns are sent. `recorded`: every arm gets the "
                "recorded history (each turn judged on its own). `own`: each arm's turn n+1 is "
                "built from its own answers to turns 1..n (content and tool calls), sent once "
                "its turn n has finished; tool results are fed back where the arm's calls equal "
                "the recorded ones, else the arm's conversation ends there as diverged (or "
                "--tool-simulator answers). A resume keeps the run's mode.",
        "choices": CONVERSATION_MODES})
    tool_simulator: str | None = field(default=None, metadata={
        "help": "Own mode: answer tool calls that differ from the recorded ones with this "
                "command (run with the call as JSON on stdin; its stdout is the result) or "
                "http(s) URL (POSTed the call as JSON; its body, or a JSON object's `content`, "
                "is the result), instead of ending the conversation. Every answer is stored "
                "in the run (results.sqlite, table tool_answers)."})
    own_reasoning: str = field(default="omit", metadata={
        "help": "Own mode: how an arm's reasoning goes back in its history: `omit` (OpenAI's "
                "and DeepSeek's rule for chat history), or in the message field "
                "`reasoning_content` or `reasoning` (for servers whose template wants it).",
        "choices": REASONING_BACK})
    budget: int | None = field(default=None, metadata={
        "help": "With --until-decided: send at most N requests before the verdict is "
                "inconclusive. Default: every record (--requests, the traffic).", "min": 1})

    def __post_init__(self) -> None:
        check_tokenizer(self.tokenizer)
        self._check_until_decided()
        if (self.traffic is None) == (self.scenario is None) and not self.resume:
            raise ConfigError("give exactly one of traffic (--traffic) or scenario (--scenario)")
        if not self.arms:
            raise ConfigError("no arm to send to")
        candidates = candidate_arms(self.arms)
        if self.required_arms:  # a replay (a capacity step may go to some arms only)
            if BASELINE not in self.arms:
                raise ConfigError(f"the {BASELINE} arm needs a URL (--{BASELINE})")
            if not candidates:
                raise ConfigError(
                    f"no candidate: give --{CANDIDATE} URL or --{CANDIDATE} NAME=URL")
        for name in candidates:
            try:
                check_candidate_name(name)
            except ValueError as exc:
                raise ConfigError(f"--{CANDIDATE}: {exc}") from exc
        for arm, url in self.arms.items():
            if not url.startswith(("http://", "https://")):
                option = f"--{arm}" if arm in REFERENCE_ARMS else f"--{CANDIDATE} {arm}="
                raise ConfigError(f"{option} must be an http(s) URL: {url!r}")
        if self.tool_simulator is not None and self.conversation_mode != OWN:
            raise ConfigError("--tool-simulator answers tool calls in --conversation-mode own "
                              "only")
        if self.conversation_mode == OWN and self.until_decided is not None:
            raise ConfigError("--until-decided judges requests one by one: it cannot stop "
                              "--conversation-mode own, whose unit is a conversation")
        if self.rate is not None and self.users is not None:
            raise ConfigError("--rate (open loop) and --users (closed loop) exclude each other")
        if self.workers < 1:
            raise ConfigError("no worker to send with: give --processes 1 or more, or "
                              "--expect-workers with workers on other hosts")
        if self.master_bind is not None:
            try:
                parse_address(self.master_bind, "--master-bind")
            except ValueError as exc:
                raise ConfigError(str(exc)) from exc
        elif self.expect_workers:
            raise ConfigError("--expect-workers needs --master-bind HOST[:PORT], an address "
                              "the workers on other hosts can reach")
        positive = {"rate": self.rate, "users": self.users, "requests": self.requests,
                    "speed": self.speed, "timeout": self.timeout,
                    "max_in_flight": self.max_in_flight}
        for name, value in positive.items():
            if value is not None and value <= 0:
                raise ConfigError(f"{name} must be > 0, got {value}")

    def _check_until_decided(self) -> None:
        if self.budget is not None and self.until_decided is None:
            raise ConfigError("--budget is the budget of --until-decided: give a policy")
        if self.budget is not None and self.budget <= 0:
            raise ConfigError(f"budget must be > 0, got {self.budget}")

    @property
    def closed_loop(self) -> bool:
        return self.users is not None

    @property
    def workers(self) -> int:
        """Locust workers the master waits for: local processes and other hosts'."""
        return self.processes + self.expect_workers

    @property
    def locust_users(self) -> int:
        """Users to spawn, a multiple of the workers so that every worker gets some."""
        users = self.users if self.users is not None else self.max_in_flight
        n = self.workers
        return max(users, n) + (-max(users, n)) % n

    @property
    def in_flight_limit(self) -> int | None:
        """The open loop's cap on requests in flight, over every worker of every host (its
        Locust users); None for a closed loop, always at its users. The run's manifest
        records it, for the gate's saturation check."""
        return None if self.closed_loop else self.locust_users

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("out", "traffic", "until_decided", "worker_token_file"):
            out[key] = None if out[key] is None else str(out[key])
        return out
