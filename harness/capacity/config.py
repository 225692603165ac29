"""`CapacityConfig`: the whole configuration of a capacity sweep, recorded in its state."""

from __future__ import annotations

from dataclasses import dataclass, field

from layergate.exporters.catalogue import ARMS, CANDIDATE, REQUIRED_ARMS, candidate_arms
from layergate.exporters.figures.signed_rank import least_draws
from layergate.exporters.figures.slo import SLO, SLOError, parse_slo
from layergate.harness.replay.settings import ConfigError, RunSettings

RATE, USERS = "rate", "users"
UNITS = {RATE: "req/s", USERS: "users"}
# replicates on restarted arms that the signed-rank interval needs for 95 %
RESTARTED_LEAST = least_draws(0.95)


@dataclass(frozen=True)
class CapacityConfig(RunSettings):
    """The run settings (`RunSettings`: out, arms, traffic, timeout, processes, metrics...),
    given to every step's replay, and the sweep's own: its SLO, its ladder, its bounds and
    its replicates."""

    slo: str = field(default="", metadata={
        "help": "Per-request latency limits, all of which a request must meet (and not "
                "error): ttft, tpot, e2e, e.g. ttft:2s,tpot:150ms (s or ms; a bare number "
                "is seconds)."})
    slo_attainment: float = field(default=0.95, metadata={
        "help": "An arm passes a step when at least this share of its measured requests "
                "meet the SLO (and its error rate is within --max-error-rate, and it did "
                "not saturate).", "min": 0, "max": 1, "min_open": True})
    max_error_rate: float = field(default=0.01, metadata={
        "help": "The most errors (share of measured requests) a passing step may have.",
        "min": 0, "max": 1})
    load: str = field(default=RATE, metadata={
        "help": "What the ladder steps: an open-loop Poisson request rate (requests/s) or "
                "a closed-loop number of users.", "choices": (RATE, USERS)})
    start: float = field(default=1.0, metadata={
        "help": "The ladder's first load (requests/s, or users).", "min": 0,
        "min_open": True})
    factor: float = field(default=2.0, metadata={
        "help": "Geometric ladder: each load is the last passing one times F, until the "
                "arm fails; bisection then refines the bracket.", "min": 1, "min_open": True})
    bisections: int = field(default=3, metadata={
        "help": "Halvings (in log load) of each arm's bracket after its first failure "
                "(users: fewer once the bracket is one user wide).", "min": 0})
    max_load: float | None = field(default=None, metadata={
        "help": "Never step above this load; an arm passing it has capacity >= it.",
        "min": 0, "min_open": True})
    warmup: float = field(default=2.0, metadata={
        "help": "Seconds at the start of each step whose requests are sent but not "
                "counted.", "min": 0})
    min_requests: int = field(default=50, metadata={
        "help": "Measured requests (after the warm-up) per step, at least (closed loop: "
                "and two per user).", "min": 1})
    min_duration: float = field(default=10.0, metadata={
        "help": "Measured seconds per step, at least (open loop: requests = load x "
                "duration when that is more than --min-requests).", "min": 0})
    knee_steps: float = field(default=2.0, metadata={
        "help": "Steps inside an arm's bracket (bisection, near the knee, which decides "
                "the interpolated capacity) measure this many times --min-requests / "
                "--min-duration's worth (1: as the others).",
        "min": 1})
    max_requests: int = field(default=100_000, metadata={
        "help": "Bound on the requests the whole sweep sends (all arms' steps, resumes "
                "included); the ladder ends when the next step would pass it.", "min": 1})
    max_time: float = field(default=3600.0, metadata={
        "help": "Bound on the sweep's seconds of stepping (resumes included); no step "
                "starts after it.", "min": 0, "min_open": True})
    resamples: int = field(default=1000, metadata={
        "help": "Bootstrap resamples for the intervals of the capacities and ratios.",
        "min": 10})
    idle_timeout: float = field(default=30.0, metadata={
        "help": "Before each step, probe every arm (one request cut to one token) until "
                "it answers as fast as it did idle, for at most S seconds (0: no check).",
        "min": 0})
    replicates: int = field(default=1, metadata={
        "help": "Sweeps of the same arms, each with its own seed (--seed + i) and a dithered "
                "start, under OUT/replicate-NN/; with 2 or more the capacity ratio's interval "
                "is across them (log ratio, with --process-spread), in OUT/replicates.json.",
        "min": 1})
    process_spread: float = field(default=0.02, metadata={
        "help": "SD of one engine process's log capacity: the between-process term of the "
                "interval across replicates (the same servers move every replicate alike); "
                "not used with --restart.",
        "min": 0})
    restart: str = field(default="", metadata={
        "help": "With --replicates: a shell command that restarts the arms' servers (e.g. "
                "'docker compose restart baseline candidate'), run before each replicate; "
                "the sweep then waits for every arm to answer. Each replicate then runs on "
                "processes of its own, their spread is inside the replicates' spread, and "
                "the interval needs no --process-spread."})
    restart_timeout: float = field(default=900.0, metadata={
        "help": "Seconds --restart's command and the wait for the arms may take together.",
        "min": 0, "min_open": True})
    target_half_width: float = field(default=0.08, metadata={
        "help": "The log half-width the replicates report sizes the replicates for (0.08: "
                "about +-8 %).", "min": 0, "min_open": True})

    def __post_init__(self) -> None:
        try:
            if self.slo or not self.resume:  # a resume may take the stored SLO
                parse_slo(self.slo)
        except SLOError as exc:
            raise ConfigError(f"--slo: {exc}") from exc
        super().__post_init__()
        for name in REQUIRED_ARMS:
            if name not in self.arms:
                raise ConfigError(f"the {name} arm needs a URL (--{name})")
        unknown = set(self.arms) - set(ARMS)
        if unknown:
            raise ConfigError(f"unknown arm {sorted(unknown)[0]!r}: arms are {', '.join(ARMS)}")
        if self.load == USERS and self.start != int(self.start):
            raise ConfigError(f"--start {self.start:g}: a number of users is whole")
        if self.max_load is not None and self.max_load < self.start:
            raise ConfigError(f"--max-load {self.max_load:g} is below --start {self.start:g}")
        if self.processes < 1:
            raise ConfigError("--processes: a step sends from this machine's workers: give 1 "
                              "or more")
        if self.restart and self.replicates < RESTARTED_LEAST:
            raise ConfigError(
                f"--restart restarts the arms between replicates, whose interval (signed-rank, "
                f"95 %) needs {RESTARTED_LEAST}: give --replicates {RESTARTED_LEAST} or more")

    @property
    def parsed_slo(self) -> SLO:
        return parse_slo(self.slo)

    @property
    def unit(self) -> str:
        return UNITS[self.load]


def sweep_arms(arms: dict[str, str], models: dict[str, str]
               ) -> tuple[dict[str, str], dict[str, str]]:
    """A sweep's arms and models from the replay's options: it judges one candidate (the
    others would need their own sweeps), whatever its name, as the arm `candidate`."""
    candidates = candidate_arms(arms)
    if len(candidates) > 1:
        raise ConfigError(f"--{CANDIDATE}: a capacity sweep takes one candidate, got "
                          f"{len(candidates)}: {', '.join(candidates)}")
    arms, models = dict(arms), dict(models)
    for name in candidates:
        arms[CANDIDATE] = arms.pop(name)
        if name in models:
            models[CANDIDATE] = models.pop(name)
    return arms, models
