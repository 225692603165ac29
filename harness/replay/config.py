"""`ReplayConfig`: the whole configuration of a shadow replay, recorded in its manifest."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from layergate.exporters import tokenizer
from layergate.exporters.catalogue import (
    BASELINE,
    CANDIDATE,
    REFERENCE_ARMS,
    REQUIRED_ARMS,
    candidate_arms,
    check_candidate_name,
)
from layergate.harness.replay.channel import parse_address
from layergate.harness.replay.own import CONVERSATION_MODES, OWN, REASONING_BACK, RECORDED
from layergate.harness.replay.settings import (
    ConfigError,
    RunSettings,
    logprobs_field,
    tokenizer_field,
)


def check_tokenizer(spec: str | None) -> None:
    """A ConfigError when a named tokenizer cannot be found or read."""
    if spec is None:
        return
    try:
        tokenizer.find(spec)
    except tokenizer.TokenizerError as exc:
        raise ConfigError(f"--tokenizer: {exc}") from exc


@dataclass(frozen=True)
class ReplayConfig(RunSettings):
    """The run settings (`RunSettings`: out, arms, traffic, timeout, processes, metrics...)
    and what only a replay has: its load (rate, users, speed), its other hosts' workers, its
    circuit breaker, its conversations and its stop once decided."""

    # arms a run must have; a capacity step sends only to the arms still stepping
    required_arms: ClassVar[tuple[str, ...]] = REQUIRED_ARMS

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
    breaker: int = field(default=10, metadata={
        "help": "Stop the run (interrupted, exit 4; finish it with --resume) once an arm's "
                "last K requests all failed to connect. 0: never.", "min": 0})
    web_port: int | None = field(default=None, metadata={
        "help": "Run Locust with its web UI on port P (default: headless).", "min": 1,
        "max": 65535})
    skip_invalid: bool = field(default=False, metadata={
        "help": "Skip bad traffic lines (each is reported) instead of stopping."})
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
        super().__post_init__()
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
                    "speed": self.speed}
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
