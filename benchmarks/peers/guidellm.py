"""GuideLLM (vllm-project/guidellm) as a peer in the side-by-side: its `guidellm run` in its
own venv, its `benchmarks.json` report read back into `Measured`.

GuideLLM 0.8 replaced the old `guidellm benchmark --target ... --rate-type ...
--output-path ...` flags with `guidellm run`, whose options each take one object (JSON or
`key=value,...`): `--backend`, `--profile`, `--data`, `--constraint`, `--tokenizer`,
`--seed`, `--output`, `--metrics`. Its capacity searches are profiles: `sweep` (synchronous,
then throughput, then rates evenly between), `goodput` (concurrency search against latency
objectives) and `knee` (throughput knee over concurrency); its trace replay is the `replay`
profile over a trace dataset (`trace_synthetic`, `mooncake`, ...). `sweep`, `slo_search`
(goodput) and `replay_trace` wrap the first two and the last; `knee` is not wrapped.

The requests go to /v1/completions: GuideLLM's chat requests ask for the output length as
`max_completion_tokens`, which servers that read only `max_tokens` (the echo server, older
engines) ignore.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.peers.common import Load, Measured, OutputError, read_json, run_counted

TOOL = "guidellm"
VERSION = "0.8.1"
# torch first, from the CPU wheel: guidellm needs torch unpinned and would otherwise pull
# the multi-GB CUDA build; naming it again keeps pip from replacing it.
INSTALL: list[list[str]] = [
    ["torch==2.13.0"],
    [f"guidellm=={VERSION}", "torch==2.13.0"],
]
REPORT = "benchmarks.json"
ENDPOINT = "/v1/completions"
# GuideLLM 0.8.1 sends from up to 10 worker processes, and each seeds its own copy of the
# Poisson generator with the same seed: the gaps come in runs of 10 equal ones (30 requests
# at 4/s were 3 gaps: 0.465 s x 9, 0.355 s x 10, 0.136 s x 10). Once (8/s, 2 CPUs) the 10
# workers also lost the schedule: 60 requests in 0.83 s, their targeted start 0 (the report's
# dispatch delay ~1.8e9 s, warning `root_late`). One worker draws one stream, a Poisson
# process, on time; it is ample for these loads and is what every function here uses unless
# told (`workers=None`: GuideLLM's default).
WORKERS = 1

# What the report's figures mean, from guidellm/schemas/base/request_stats.py.
DEFINITIONS = (
    "TTFT: first streamed chunk with content minus request start (time.time() just before "
    "the HTTP request is sent), per request",
    "ITL: GuideLLM's inter_token_latency_ms, per request (last token - first token) / "
    "(output tokens - 1), output tokens from the server's usage, its distribution weighting "
    "each request by output tokens - 1; it also reports time_per_output_token_ms = "
    "(last token - request start) / output tokens (TPOT, first token included; not used)",
    "E2E: request_latency = request end - request start, per request",
    "percentiles: GuideLLM's own, nearest rank over successful requests (no interpolation)",
)


class ReportError(OutputError):
    """GuideLLM's report is missing or not what this adapter reads."""


@dataclass(frozen=True)
class Search:
    """What GuideLLM's goodput search concluded (its report's `conclusions`)."""

    best_passing_streams: int | None
    lowest_failing_streams: int | None
    stop_reason: str | None
    probes: tuple[dict[str, Any], ...]  # one per concurrency tried, as GuideLLM wrote it
    measured: tuple[Measured, ...]  # each probe's latencies
    raw: Path


def _obj(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


def _env(workers: int | None) -> dict[str, str]:
    # no hub here: the tokenizer is a local directory and nothing may be fetched
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1"}
    if workers is not None:  # None: GuideLLM's own default (10)
        env["GUIDELLM__MAX_WORKER_PROCESSES"] = str(workers)
    return env


def command(venv: Path, load: Load, report: Path, profile: dict[str, Any],
            data: dict[str, Any], *extra: str) -> list[str]:
    """`guidellm run` against `load.url`, streaming, writing its JSON report to `report`."""
    # validate_backend off: GuideLLM's check is a GET /health, which llama-cpp-python's
    # server does not have (404), and a server that answers requests needs no other check
    backend = {"kind": "openai_http", "target": load.url, "model": load.model,
               "request_format": ENDPOINT, "stream": True, "validate_backend": False}
    return [str(venv / "bin" / "guidellm"), "run",
            "--backend", _obj(backend),
            "--profile", _obj(profile),
            "--data", _obj(data),
            "--tokenizer", _obj({"kind": "huggingface_auto", "model": str(load.tokenizer)}),
            "--seed", _obj({"kind": "static", "value": load.seed}),
            "--output", _obj({"kind": "json", "path": str(report)}),
            *extra,
            "--disable-console-interactive"]


def _synthetic(load: Load) -> dict[str, Any]:
    # no stdev: every prompt `prompt_tokens` long, every answer `output_tokens`
    return {"kind": "synthetic_text", "prompt_tokens": load.prompt_tokens,
            "output_tokens": load.output_tokens}


def _max_requests(count: int) -> str:
    return _obj({"kind": "max_requests", "count": count})


def profile(load: Load) -> dict[str, Any]:
    """GuideLLM's `poisson` profile at the rate, or for a closed loop of U users its
    `concurrent` profile of U streams (each stream's next request when its last is done)."""
    if load.closed:
        return {"kind": "concurrent", "streams": [load.users]}
    return {"kind": "poisson", "rate": [load.rate]}


def _arrivals(load: Load, workers: int | None) -> str:
    if load.closed:
        return (f"closed loop: GuideLLM's concurrent profile of {load.users} streams, from "
                f"{workers or 'up to 10'} worker process(es)")
    if workers == 1:
        return "arrivals: Poisson (GuideLLM's poisson profile, one worker process)"
    return (f"arrivals: GuideLLM's poisson profile from {workers or 'up to 10'} worker "
            "processes, identically seeded: gaps repeat in runs of the worker count")


def _run(cmd: list[str], work: Path, report: Path, workers: int | None
         ) -> tuple[dict[str, Any], float, float]:
    work.mkdir(parents=True, exist_ok=True)
    _, cpu, wall = run_counted(cmd, cwd=work, env=_env(workers))
    return read_report(report), cpu, wall


def run(load: Load, work: Path, venv: Path, workers: int | None = WORKERS) -> Measured:
    """`load.requests` requests at `load.rate` req/s, Poisson arrivals (GuideLLM's
    `poisson` profile, seeded by `load.seed`) from `workers` processes (see WORKERS), or
    from `load.users` concurrent streams (`--profile '{"kind":"concurrent","streams":[U]}'`):

        GUIDELLM__MAX_WORKER_PROCESSES=1 HF_HUB_OFFLINE=1 guidellm run
            --backend '{"kind":"openai_http","target":URL,"model":M,
                        "request_format":"/v1/completions","stream":true}'
            --profile '{"kind":"poisson","rate":[R]}'
            --data '{"kind":"synthetic_text","prompt_tokens":P,"output_tokens":O}'
            --tokenizer '{"kind":"huggingface_auto","model":TOKENIZER_DIR}'
            --seed '{"kind":"static","value":S}' --constraint '{"kind":"max_requests","count":N}'
            --output '{"kind":"json","path":WORK/benchmarks.json}' --disable-console-interactive
    """
    report = work / REPORT
    cmd = command(venv, load, report, profile(load), _synthetic(load),
                  "--constraint", _max_requests(load.requests))
    doc, cpu, wall = _run(cmd, work, report, workers)
    return measured(doc, report, cpu, wall, index=0, notes=(_arrivals(load, workers),))


def sweep(load: Load, work: Path, venv: Path, size: int = 10,
          workers: int | None = WORKERS) -> list[Measured]:
    """GuideLLM's rate sweep, `load.requests` requests at each step:

        guidellm run --profile '{"kind":"sweep","sweep_size":SIZE,"strategy_type":"poisson"}'
            --constraint '{"kind":"max_requests","count":N}' ...

    It runs synchronous (one at a time), then throughput (all at once, up to 512), then
    size - 2 Poisson rates evenly between the two rates it measured; one `Measured` per
    step, in order, its strategy and rate in `notes`. `load.rate` is not used."""
    report = work / REPORT
    profile = {"kind": "sweep", "sweep_size": size, "strategy_type": "poisson"}
    cmd = command(venv, load, report, profile, _synthetic(load),
                  "--constraint", _max_requests(load.requests))
    doc, cpu, wall = _run(cmd, work, report, workers)
    # the CPU and wall time are the whole sweep's, given with each step
    return [measured(doc, report, cpu, wall, index=i) for i in range(len(_benchmarks(doc)))]


def slo_search(load: Load, work: Path, venv: Path, ttft_ms: float | None = None,
               tpot_ms: float | None = None, e2el_ms: float | None = None,
               attainment: float = 0.95, max_streams: int = 256,
               workers: int | None = WORKERS) -> Search:
    """GuideLLM's goodput search, `load.requests` requests per probe:

        guidellm run --profile '{"kind":"goodput","target_attainment":A,"max_streams":M}'
            --metrics '{"kind":"generative","slo":{"ttft_ms":..,"tpot_ms":..,"e2el_ms":..}}'
            --constraint '{"kind":"max_requests","count":N}' ...

    It searches over concurrency (streams), not rate: doubling from 4 until a level has
    fewer than `attainment` of its requests meeting every objective, then bisecting to 10 %.
    Its `tpot_ms` objective is held against its inter-token latency (first token
    excluded)."""
    slo = {k: v for k, v in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms),
                             ("e2el_ms", e2el_ms)) if v is not None}
    report = work / REPORT
    profile = {"kind": "goodput", "target_attainment": attainment, "max_streams": max_streams}
    cmd = command(venv, load, report, profile, _synthetic(load),
                  "--constraint", _max_requests(load.requests),
                  "--metrics", _obj({"kind": "generative", "slo": slo}))
    doc, cpu, wall = _run(cmd, work, report, workers)
    return search(doc, report, cpu, wall)


def replay_trace(trace: Path, load: Load, work: Path, venv: Path, time_scale: float = 1.0,
                 kind: str = "trace_synthetic", workers: int | None = WORKERS) -> Measured:
    """Replays a JSONL trace with GuideLLM's `replay` profile, each request at its timestamp:

        guidellm run --profile '{"kind":"replay","schedule_turn":"timestamp"}'
            --data '{"kind":"trace_synthetic","time_scale":S,
                     "source":{"kind":"json_file","path":TRACE}}' ...

    Rows need `timestamp` (seconds; `time_scale` 0.001 for a trace in milliseconds such
    as Mooncake's), `input_length` and `output_length`; the prompts are synthetic, of
    those lengths. `kind="mooncake"` also builds shared prefixes from the rows'
    `hash_ids`. `load.rate`, `load.prompt_tokens`, `load.output_tokens` are not used;
    `load.requests` caps how many rows are sent."""
    report = work / REPORT
    data = {"kind": kind, "time_scale": time_scale,
            "source": {"kind": "json_file", "path": str(trace.resolve())}}
    cmd = command(venv, load, report, {"kind": "replay", "schedule_turn": "timestamp"}, data,
                  "--constraint", _max_requests(load.requests))
    doc, cpu, wall = _run(cmd, work, report, workers)
    return measured(doc, report, cpu, wall, index=0, notes=("arrivals: trace timestamps",))


# --- reading the report ---------------------------------------------------------------------

def read_report(path: Path) -> dict[str, Any]:
    """The report GuideLLM wrote, with a clear error when it did not."""
    doc = read_json(path, TOOL)
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ReportError(f"{TOOL}: {path} has no 'benchmarks' list")
    return doc


def _benchmarks(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return doc["benchmarks"]


def _percentiles(metrics: dict[str, Any], name: str, scale: float, path: Path
                 ) -> dict[int, float]:
    """p50/p90/p99 of the successful requests' `name`, times `scale` (ms -> s)."""
    try:
        pct = metrics[name]["successful"]["percentiles"]
        return {q: float(pct[f"p{q}"]) * scale for q in (50, 90, 99)}
    except (KeyError, TypeError) as exc:
        raise ReportError(f"{TOOL}: {path} lacks {name}.successful.percentiles "
                          f"({exc!r})") from exc


def _strategy(bench: dict[str, Any]) -> str:
    strategy = bench.get("config", {}).get("strategy", {})
    kind = strategy.get("type_", "?")
    rate = strategy.get("rate", strategy.get("streams"))
    label = f"{kind}@{rate:.3f}" if isinstance(rate, int | float) else str(kind)
    return f"{label}, {strategy.get('worker_count', '?')} worker process(es)"


def sweep_rates(doc: dict[str, Any]) -> list[tuple[str, float | None, bool]]:
    """Each benchmark's strategy, the rate it offered (None for the synchronous and
    throughput steps of a sweep, which offer none) and whether GuideLLM warned that it
    lost the schedule (`root_late`: in 0.8.1 the first Poisson step after the throughput
    one sent its requests at once, targeted starts before 0), from the report as written."""
    out = []
    for bench in _benchmarks(doc):
        bench = bench if isinstance(bench, dict) else {}
        strategy = bench.get("config", {}).get("strategy", {})
        rate = strategy.get("rate")
        late = any(isinstance(w, dict) and w.get("code") == "root_late"
                   for w in bench.get("warnings") or ())
        out.append((str(strategy.get("type_", "?")),
                    float(rate) if isinstance(rate, int | float) else None, late))
    return out


def _said(bench: dict[str, Any]) -> list[str]:
    """What GuideLLM itself said of the run: its achieved rate and its warnings (a late
    arrival schedule shows there, e.g. `root_late`)."""
    rps = bench.get("metrics", {}).get("requests_per_second", {}).get("successful", {})
    said = [f"GuideLLM: {rps['mean']:.3f} req/s over {bench.get('duration', 0.0):.2f} s"
            ] if isinstance(rps, dict) and "mean" in rps else []
    return said + [f"GuideLLM warning {w.get('code')}: {w.get('message')}"
                   for w in bench.get("warnings", []) if isinstance(w, dict)]


def measured(doc: dict[str, Any], path: Path, cpu_s: float, wall_s: float, index: int = 0,
             notes: tuple[str, ...] = ()) -> Measured:
    """Benchmark `index` of a report as `Measured`; every figure is GuideLLM's own."""
    benches = _benchmarks(doc)
    if index >= len(benches):
        raise ReportError(f"{TOOL}: {path} has {len(benches)} benchmarks, not {index + 1}")
    bench = benches[index]
    metrics = bench.get("metrics") if isinstance(bench, dict) else None
    if not isinstance(metrics, dict):
        raise ReportError(f"{TOOL}: {path} benchmark {index} has no metrics")
    try:
        ok = int(metrics["request_totals"]["successful"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"{TOOL}: {path} lacks request_totals.successful") from exc
    return Measured(
        tool=TOOL,
        ttft=_percentiles(metrics, "time_to_first_token_ms", 1e-3, path),
        itl=_percentiles(metrics, "inter_token_latency_ms", 1e-3, path),
        e2e=_percentiles(metrics, "request_latency", 1.0, path),
        ok=ok, cpu_s=cpu_s, wall_s=wall_s, raw=path,
        notes=(f"strategy: {_strategy(bench)}", f"endpoint: {ENDPOINT}, streamed", *notes,
               *_said(bench), *DEFINITIONS))


def search(doc: dict[str, Any], path: Path, cpu_s: float, wall_s: float) -> Search:
    """The goodput search's conclusion and each probe's latencies."""
    found = [c for c in doc.get("conclusions", []) if isinstance(c, dict) and "probes" in c]
    if not found:
        raise ReportError(f"{TOOL}: {path} has no goodput conclusion")
    c = found[0]
    probes = tuple(measured(doc, path, cpu_s, wall_s, index=i)
                   for i in range(len(_benchmarks(doc))))
    return Search(best_passing_streams=c.get("best_passing_streams"),
                  lowest_failing_streams=c.get("lowest_failing_streams"),
                  stop_reason=c.get("stop_reason"), probes=tuple(c["probes"]),
                  measured=probes, raw=path)
