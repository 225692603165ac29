"""inference-perf (kubernetes-sigs) as a peer: its config file written from a `Load`, the tool
run in its own venv, and its own report files read into `Measured`.

    DIR/bin/inference-perf --config_file WORK/config.yml --log-level INFO

Python: every release on PyPI (0.1.1 to 0.7.0) declares `requires-python >=3.12`, and this
project's machines have 3.11 only. The code itself is 3.11-clean (every module compiles on
3.11, and it ran end to end here). `pip install --ignore-requires-python inference-perf==0.7.0`
fails: the flag reaches the dependencies too, so pip takes numpy 2.5.5 (>=3.12) as a source
archive whose build stops with "meson-python: error: The package requires Python version
>=3.12, running on 3.11.2". So `INSTALL` installs the tool's declared dependencies as pip
resolves them for 3.11 (here numpy 2.4.6, pydantic 2.14.4, aiohttp 3.14.5, datasets 5.2.0,
tokenizers 0.22.2), then the tool alone with `--no-deps --ignore-requires-python`: only the
one check that is wrong is skipped. No torch (transformers loads only the tokenizer).

What the run asks of the tool:
- `api: completion, streaming: true` against `/v1/completions`: its prompt generators
  ("synthetic", "random") only make completions requests; chat needs a dataset or the
  shared-prefix generator.
- `data: synthetic` with fixed input and output lengths: prompts cut from the tool's bundled
  Shakespeare so that each is exactly `prompt_tokens` tokens of `load.tokenizer`.
- `load: poisson`, one stage of `rate` x `duration` s; the tool sends int(rate x duration)
  requests and a stage's duration is a whole number of seconds, so the stage is
  round(requests / rate) s long and its rate requests / duration (60 at 8/s: 7.5/s for 8 s);
  `Measured.notes` says the rate sent. A closed loop of U users (`Load.users`) is
  `load: concurrent`, one stage of `num_requests` N at `concurrency_level` U.
- `report.request_lifecycle.use_server_output_tokens: true`: its time per output token is
  (last token - first token) / (tokens - 1), and the tokens are the server's `usage` count
  rather than its own re-tokenization of the streamed words.

Its figures (summary_lifecycle_metrics.json, `successes.latency`), all timed from the moment
it sends the request (`start_time`, after its own scheduling delay):
- TTFT `time_to_first_token`: first content chunk - send.
- ITL: `time_per_output_token` (per request, as above) is what `Measured.itl` holds; the
  tool's `inter_token_latency` pools every gap between consecutive tokens of every request
  after re-tokenizing each chunk with `load.tokenizer` (a chunk of two tokens gives one gap of
  0), so it is given in the notes only.
- E2E `request_latency`: end of the stream - send.

CPU: about 7 s a run before the first request (imports, and the synthetic generator
tokenizing its 5 MB corpus), so cpu_s per request falls with the run's length (measured
here: 258 ms/request for 30 requests, 127 to 144 for 60).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.peers.common import QUANTILES, Load, Measured, OutputError, read_json, run_counted

TOOL = "inference-perf"
VERSION = "0.7.0"
# the dependencies of inference-perf 0.7.0 as its metadata declares them (no extras)
DEPENDENCIES = [
    "aiohttp>=3.11.11", "pydantic>=2.10.6", "numpy>=2.2.2", "datasets>=3.3.2",
    "transformers==5.13.0", "jinja2>=3.1.0", "google-cloud-storage>=3.1.0", "pyyaml>=6.0.2",
    "boto3>=1.39.0", "uvloop>=0.21.0", "tqdm>=4.67.1", "aiofiles>=25.1.0", "tiktoken>=0.12.0",
    "rich>=13.0.0", "av>=13.0.0", "pillow>=10.0.0", "prometheus-client>=0.20.0",
]
INSTALL: list[list[str]] = [
    DEPENDENCIES,
    ["--no-deps", "--ignore-requires-python", f"inference-perf=={VERSION}"],
]

SUMMARY = "summary_lifecycle_metrics.json"
KEYS = {"ttft": "time_to_first_token", "itl": "time_per_output_token",
        "e2e": "request_latency"}
PERCENTILE_KEYS = {50: "median", 90: "p90", 99: "p99"}  # how the tool names them
# as many prompt lengths as any stage (or the sweep's probe) could ask for: the tool makes
# them up front and would otherwise size them from the stages it knows before a sweep
LENGTHS = 100_000


def stage_of(load: Load) -> tuple[float, int]:
    """(rate, whole seconds) that make exactly `load.requests` requests in one stage."""
    duration = max(1, round(load.requests / load.rate))
    return load.requests / duration, duration


def _lengths(tokens: int) -> dict[str, Any]:
    return {"type": "fixed", "mean": tokens, "min": tokens, "max": tokens, "std_dev": 0,
            "total_count": LENGTHS}


def config(load: Load, reports: Path, load_section: dict[str, Any],
           data: dict[str, Any] | None = None,
           goodput: dict[str, float] | None = None) -> dict[str, Any]:
    """The tool's config (YAML, written as JSON, which YAML reads)."""
    data = data or {"type": "synthetic", "input_distribution": _lengths(load.prompt_tokens),
                    "output_distribution": _lengths(load.output_tokens)}
    return {
        "api": {"type": "completion", "streaming": True},
        "server": {"type": "vllm", "model_name": load.model, "base_url": load.url,
                   "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(load.tokenizer)},
        "data": data,
        "load": {"num_workers": 1, "base_seed": load.seed, **load_section},
        "report": {"request_lifecycle": {"summary": True, "per_stage": True,
                                         "use_server_output_tokens": True},
                   "prometheus": None,
                   **({"goodput": {"constraints": goodput}} if goodput else {})},
        "storage": {"local_storage": {"path": str(reports)}},
    }


def environment() -> dict[str, str]:
    # no hub here: the tokenizer is a local directory and nothing may try to download
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "NO_COLOR": "1", "TERM": "dumb"}


def invoke(cfg: dict[str, Any], work: Path, venv: Path,
           timeout: float = 900) -> tuple[float, float]:
    """Run the tool on `cfg`; (CPU s, wall s). Its console goes to WORK/inference-perf.log."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / "config.yml"
    path.write_text(json.dumps(cfg, indent=2))
    cmd = [str(venv / "bin" / "inference-perf"), "--config_file", str(path),
           "--log-level", "INFO"]
    proc, cpu, wall = run_counted(cmd, cwd=work, env=environment(), timeout=timeout)
    (work / "inference-perf.log").write_text(proc.stdout + proc.stderr)
    return cpu, wall


def load_section(load: Load) -> tuple[dict[str, Any], str]:
    """The config's `load` stages for `load`, and what they ask in words: one Poisson stage
    at about `load.rate`/s, or for a closed loop of U users one `concurrent` stage of
    `load.requests` requests at concurrency U (the tool queues them all at once, its
    worker's semaphore of U lets the next go when one is done: main.py, loadgen)."""
    if load.closed:
        return ({"type": "concurrent", "stages": [{"num_requests": load.requests,
                                                   "concurrency_level": load.users}]},
                f"load: closed loop, the tool's 'concurrent' stage at concurrency_level "
                f"{load.users}, {load.requests} requests")
    rate, duration = stage_of(load)
    return ({"type": "poisson", "stages": [{"rate": rate, "duration": duration}]},
            f"load: Poisson arrivals (the tool's 'poisson' timer: a Poisson count per "
            f"second, spread over that second), {rate:g} req/s for {duration} s")


def run(load: Load, work: Path, venv: Path) -> Measured:
    """`load.requests` requests in one stage (see `load_section`)."""
    reports = work / "reports"
    section, words = load_section(load)
    cpu, wall = invoke(config(load, reports, section), work, venv)
    return parse(reports / SUMMARY, cpu, wall, notes=(words, *_definitions()))


def _definitions() -> tuple[str, ...]:
    return ("endpoint: /v1/completions, streamed; prompts from the tool's 'synthetic' "
            "generator (bundled Shakespeare), fixed lengths",
            "ttft: time_to_first_token (first content chunk - send); e2e: request_latency "
            "(end of stream - send); send = the tool's start_time, after its schedule delay",
            "itl: time_per_output_token = (last - first token) / (server usage tokens - 1), "
            "per request; the tool's pooled inter_token_latency is in these notes")


def read_report(path: Path) -> dict[str, Any]:
    """One of the tool's JSON reports; a clear error naming the file otherwise."""
    report = read_json(path, TOOL)
    if not isinstance(report, dict) or not isinstance(report.get("successes"), dict):
        raise OutputError(f"{TOOL} output {path} has no 'successes' section")
    return report


def quantiles(summary: dict[str, Any] | None, path: Path, name: str) -> dict[int, float]:
    """p50/p90/p99 of one of the tool's latency summaries (None where nothing succeeded)."""
    if summary is None:
        return {}
    try:
        return {q: float(summary[PERCENTILE_KEYS[q]]) for q in QUANTILES}
    except (KeyError, TypeError, ValueError) as e:
        raise OutputError(f"{TOOL} output {path}: {name} lacks {e}") from e


def parse(path: Path, cpu_s: float, wall_s: float,
          notes: tuple[str, ...] = ()) -> Measured:
    """The tool's summary (or stage) report at `path` as `Measured`."""
    report = read_report(path)
    successes = report["successes"]
    latency = successes.get("latency")
    if not isinstance(latency, dict):
        raise OutputError(f"{TOOL} output {path} has no 'successes.latency'")
    figures = {field: quantiles(latency.get(key), path, key) for field, key in KEYS.items()}
    pooled = quantiles(latency.get("inter_token_latency"), path, "inter_token_latency")
    failed = (report.get("failures") or {}).get("count", 0)
    extra = ["tool's pooled inter_token_latency p50/p90/p99 s: "
             + "/".join(f"{pooled[q]:.4f}" for q in QUANTILES)] if pooled else []
    if failed:
        extra.append(f"the tool counted {failed} failed requests")
    if mismatched := successes.get("token_count_mismatches"):
        # its chunk-wise re-tokenization disagreed with the server's count (why tpot uses usage)
        extra.append(f"token_count_mismatches: {mismatched} (client vs server token counts)")
    if goodput := successes.get("goodput_metrics"):
        extra.append(f"goodput: {json.dumps(goodput, sort_keys=True)}")
    return Measured(tool=TOOL, ttft=figures["ttft"], itl=figures["itl"], e2e=figures["e2e"],
                    ok=int(successes.get("count", 0)), cpu_s=cpu_s, wall_s=wall_s, raw=path,
                    notes=(*notes, *extra))


def sweep(load: Load, work: Path, venv: Path, stages: int = 5, stage_duration: int = 30,
          spacing: str = "linear", probe_requests: int = 200, probe_timeout: float = 60,
          slo: dict[str, float] | None = None) -> list[Measured]:
    """The tool's own capacity sweep (`load.sweep`): a probe stage sends `probe_requests` in
    5 s, the tool takes the 95th percentile of the rates at which the in-flight requests
    drained as the saturation rate, then runs `stages` Poisson stages of `stage_duration` s
    at rates from 1/s up to it (linearly or geometrically spaced). `slo` (seconds; keys
    ttft, tpot, itl, ntpot, request_latency) adds the tool's goodput per stage: the share and
    rate of requests meeting every constraint, in each stage's notes. The tool has no SLO
    search of its own (no bisection on the rate for a goodput target); `load.rate` and
    `load.requests` are unused here. The probe offers probe_requests / 5 req/s, so its
    saturation figure means something only when that is above the server's capacity (tried
    here on an echo server of 4 slots, about 30 req/s: 100 probe requests gave 8.79 and
    stages at 1, 4.9 and 8.79 req/s). One `Measured` per stage, from
    stage_N_lifecycle_metrics.json; cpu_s and wall_s are the whole sweep's.

        inference-perf --config_file WORK/config.yml   (load.sweep: {type, num_requests,
        timeout, num_stages, stage_duration}, load.stages: [])"""
    reports = work / "reports"
    section = {"type": "poisson", "stages": [],
               "sweep": {"type": spacing, "num_requests": probe_requests,
                         "timeout": probe_timeout, "num_stages": stages,
                         "stage_duration": stage_duration}}
    cpu, wall = invoke(config(load, reports, section, goodput=slo), work, venv,
                       timeout=probe_timeout + stages * (stage_duration + 150) + 120)
    return [parse(p, cpu, wall, notes=_stage_notes(p)) for p in _stage_reports(reports)]


@dataclass(frozen=True)
class StageGoodput:
    """One stage of a sweep as the tool judged it against its goodput constraints."""

    stage: int
    requested_rate: float
    achieved_rate: float | None
    good: int  # requests meeting every constraint (`goodput_metrics.good_requests`)
    total: int  # the stage's successful requests

    @property
    def share(self) -> float:
        return self.good / self.total if self.total else 0.0


def stage_goodputs(reports: Path) -> list[StageGoodput]:
    """Each stage_N_lifecycle_metrics.json's rate and goodput, in stage order (a sweep run
    with `slo`); a stage without goodput figures is an error naming the file."""
    out = []
    for path in _stage_reports(reports):
        report = read_report(path)
        load = report.get("load_summary") or {}
        goodput = report["successes"].get("goodput_metrics")
        if not isinstance(goodput, dict) or not isinstance(load.get("requested_rate"),
                                                           int | float):
            raise OutputError(f"{TOOL} output {path}: no goodput_metrics or requested_rate "
                              "(was the sweep run with slo?)")
        achieved = load.get("achieved_rate")
        out.append(StageGoodput(int(path.name.split("_")[1]), float(load["requested_rate"]),
                                float(achieved) if isinstance(achieved, int | float) else None,
                                int(goodput["good_requests"]), int(goodput["total_requests"])))
    return out


def _stage_reports(reports: Path) -> list[Path]:
    found = sorted(reports.glob("stage_*_lifecycle_metrics.json"),
                   key=lambda p: int(p.name.split("_")[1]))
    if not found:
        raise OutputError(f"{TOOL} wrote no stage_*_lifecycle_metrics.json in {reports}")
    return found


def _stage_notes(path: Path) -> tuple[str, ...]:
    load = read_report(path).get("load_summary") or {}
    return (f"{path.name}: requested {load.get('requested_rate')} req/s, achieved "
            f"{load.get('achieved_rate')} req/s (the tool's figures)", *_definitions())


def replay_trace(trace: Path, load: Load, work: Path, venv: Path) -> Measured:
    """The tool's trace replay (`load.type: trace_replay`): one request per row of an Azure
    LLM inference trace CSV (TIMESTAMP,ContextTokens,GeneratedTokens, the only format it
    reads), sent at the row's offset from the first row, each a prompt of ContextTokens
    random vocabulary tokens (its 'random' generator: the lengths come from the same file)
    asking for GeneratedTokens tokens. `load.rate`, `load.requests` and the lengths are
    unused. It cannot replay a trace's prompt text, nor conversations (those need its
    OTel / Weka session formats).

        inference-perf --config_file WORK/config.yml   (load: {type: trace_replay,
        trace: {file: TRACE, format: AzurePublicDataset}}, data: {type: random,
        trace: {file: TRACE}})"""
    reports = work / "reports"
    source = {"file": str(trace.resolve()), "format": "AzurePublicDataset"}
    section = {"type": "trace_replay", "trace": source,
               "stages": [{"rate": 1, "duration": 1}]}  # required; the trace sets both
    cfg = config(load, reports, section, data={"type": "random", "trace": source})
    cpu, wall = invoke(cfg, work, venv)
    return parse(reports / SUMMARY, cpu, wall,
                 notes=(f"trace replay of {trace.name} (row timestamps, random prompts)",
                        *_definitions()[1:]))
