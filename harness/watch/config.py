"""The whole configuration of a watch, one object passed down and the owner of every
default, help text and bound the CLI shows (exporters/cli_options.py builds the options from
these fields). Kept free of heavy imports: `layergate --help` reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from layergate.exporters.catalogue import FAIL, PUBLIC_PERCENTS


@dataclass(frozen=True)
class WatchConfig:
    prometheus: str = field(metadata={
        "help": "Prometheus that scrapes both arms, e.g. http://prometheus:9090."})
    baseline: str = field(metadata={
        "help": "Label matchers picking the baseline's series, e.g. 'arm=\"baseline\"' or "
                "'job=\"vllm-stable\",namespace=\"prod\"'."})
    candidate: str = field(metadata={"help": "Label matchers picking the canary's series."})
    policy: Path | None = field(default=None, metadata={
        "help": "Watch policy (live figures, thresholds, alpha): a bundled name "
                "(`layergate policies`) or a YAML file. Default: no-regression."})
    engine: str = field(default="layergate", metadata={
        "help": "Whose metric names to read: a key of the mapping file (layergate, "
                "layergate-replay, vllm, tgi)."})
    metric_names: Path | None = field(default=None, metadata={
        "help": "Mapping file of engine -> role -> metric name. Default: the bundled "
                "scenarios/watch/metric-names.yaml."})
    stages: tuple[float, ...] = field(default=PUBLIC_PERCENTS, metadata={
        "help": "Percent of traffic on the candidate at each stage (default: the rollout "
                "ladder's public stages); every stage below 100 is watched, reaching 100 "
                "is the promotion."})
    window_s: float = field(default=60.0, metadata={
        "help": "Length of one window; at least 4 scrape intervals."})
    min_windows: int = field(default=5, metadata={
        "help": "Windows with data a stage needs before it may advance.", "min": 1})
    max_windows: int = field(default=30, metadata={
        "help": "Windows with data after which an undecided stage is inconclusive.",
        "min": 1})
    no_data_windows: int = field(default=3, metadata={
        "help": "Windows in a row without data after which the watch ends (exit 4).",
        "min": 1})
    min_requests: int = field(default=1, metadata={
        "help": "Requests each arm must serve in a window for it to count.", "min": 1})
    lag_s: float = field(default=2.0, metadata={
        "help": "How long after a window's end to read it (a scrape interval or so)."})
    on_advance: str | None = field(default=None, metadata={
        "help": "Shell command run once when a stage is decided good; "
                "$LAYERGATE_WATCH_NEXT_STAGE is the share to set."})
    on_rollback: str | None = field(default=None, metadata={
        "help": "Shell command run once when the canary is decided worse."})
    hook_timeout_s: float = field(default=300.0, metadata={
        "help": "A hook still running after this has failed."})
    serve_port: int | None = field(default=None, metadata={
        "help": "Also answer on this port: /metrics, /status (Argo Rollouts web metric) and "
                "/flagger/<hook> (Flagger webhooks, POST); keeps serving the verdict, and "
                "starts over when Flagger names a new revision, until stopped.",
        "min": 0, "max": 65535})
    host: str = field(default="127.0.0.1", metadata={"help": "Address --serve binds."})
    controller_weight: str | None = field(default=None, metadata={
        "help": "PromQL giving the canary weight the controller set, e.g. Flagger's "
                "'flagger_canary_weight{workload=\"llm\",namespace=\"llm\"}'. "
                "confirm-traffic-increase grants a step only from a weight the watch has "
                "decided. Default: the candidate's observed share of the requests."})
    state: Path | None = field(default=None, metadata={
        "help": "State file: every window, the stage, the revision, each hook run and each "
                "controller answer, rewritten atomically after each; a watch restarted "
                "with it resumes where it was. Refused if written for another rollout."})
    on_unfinished_hook: str = field(default=FAIL, metadata={
        "help": "A hook the state file shows started but never finished (the watch died "
                "while it ran): run it again, or fail (exit 4) for a person to check.",
        "choices": (FAIL, "rerun")})
