"""AIPerf (NVIDIA's `aiperf profile`) in the side-by-side: the command lines that make it send
a `Load`, a rate sweep, its own SLO search and a trace replay, and the readers of the files it
writes (`profile_export_aiperf.json` per run, `search_history.json` per search).

What AIPerf measures, from its 0.13.0 source (aiperf/metrics/types/):
- TTFT `time_to_first_token`: first content chunk's arrival - request start.
- E2E `request_latency`: last content chunk's arrival - request start.
- ITL `inter_token_latency`: per request (request_latency - TTFT) / (OSL - 1), a TPOT in all
  but name; OSL is the server's own `usage.completion_tokens` here (--use-server-token-count),
  since the echo server's one-word tokens are not the tokenizer's. It also reports
  `inter_chunk_latency` (gaps between chunks), which is not read.
Percentiles are over the successful requests (its `adj_*` ones, failures as +inf, are not read).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.peers.common import QUANTILES, Load, Measured, read_json, run_counted

TOOL = "aiperf"
VERSION = "0.13.0"
# no torch among its requirements (transformers is used for the tokenizer only)
INSTALL: list[list[str]] = [[f"aiperf=={VERSION}"]]

SUMMARY = "profile_export_aiperf.json"
HISTORY = "search_history.json"
ENDPOINT = "completions"  # /v1/completions: its chat payload says max_completion_tokens
UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
NOTES = (
    "ITL: aiperf inter_token_latency = (request_latency - TTFT) / (OSL - 1) per request, "
    "OSL from the server's usage (--use-server-token-count): a TPOT",
    "TTFT: first content chunk - request start; E2E: request_latency = last content chunk - "
    "request start; percentiles over successful requests",
    "prompts: synthetic, --isl tokens of the given tokenizer, stddev 0; --osl as max_tokens, "
    "stddev 0; streamed /v1/completions",
)

TRACE_PROMPTS = ("prompts: synthesized to each row's input length (from its hash_ids blocks "
                 "where it has them), its output length as max_tokens; streamed /v1/completions")


@dataclass(frozen=True)
class Search:
    """What AIPerf's own search found: the highest request rate it tried that met every SLA
    filter, the lowest that did not, and each iteration's (rate, feasible)."""

    feasible_max: float | None
    infeasible_min: float | None
    breach: str | None  # what broke at infeasible_min, as the tool wrote it
    iterations: tuple[tuple[float, bool], ...]
    convergence: str | None
    cpu_s: float
    wall_s: float
    raw: Path


HUB_REPO = "local/tokenizer"  # the name the tokenizer goes by in the run's own hub cache
HUB_COMMIT = "0" * 40


def _env(work: Path) -> dict[str, str]:
    # no hub here: nothing may be downloaded, and the tokenizer comes from `work`'s own cache
    # the dataset cache too: shared, it would make a later run cheaper than the first
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "HF_HUB_CACHE": str(work / "hf-hub"),
            "AIPERF_DATASET_MMAP_CACHE_DIR": str(work / "dataset-cache"),
            "AIPERF_DATASET_MMAP_BASE_PATH": str(work), "NO_COLOR": "1"}


def hub_cache(tokenizer: Path, work: Path) -> str:
    """`tokenizer` (a local directory) as a snapshot in the run's own hub cache, named
    HUB_REPO: under HF_HUB_OFFLINE aiperf 0.13.0 looks every --tokenizer up with
    snapshot_download(local_files_only=True), which refuses a path ("Repo id must be in the
    form 'repo_name' or 'namespace/repo_name'"); links, nothing is copied."""
    if not (tokenizer / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{tokenizer}: no tokenizer.json (a local tokenizer directory)")
    repo = work / "hf-hub" / f"models--{HUB_REPO.replace('/', '--')}"
    snapshot = repo / "snapshots" / HUB_COMMIT
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(HUB_COMMIT)
    for item in tokenizer.resolve().iterdir():
        link = snapshot / item.name
        if item.is_file() and not link.exists() and item.suffix != ".safetensors":
            link.symlink_to(item)
    return HUB_REPO


def _base(venv: Path, load: Load, artifacts: Path) -> list[str]:
    """The flags every command shares: target, tokenizer, output, and no UI, no GPU or
    server-metrics scraping (neither exists here, and they cost CPU)."""
    tokenizer = hub_cache(load.tokenizer, artifacts.parent)
    return [str(venv / "bin" / "aiperf"), "profile", "--model", load.model, "--url", load.url,
            "--endpoint-type", ENDPOINT, "--streaming", "--tokenizer", tokenizer,
            "--use-server-token-count", "--random-seed", str(load.seed),
            "--artifact-dir", str(artifacts), "--ui-type", "none",
            "--no-server-metrics", "--no-gpu-telemetry"]


def _synthetic(load: Load) -> list[str]:
    return ["--isl", str(load.prompt_tokens), "--isl-stddev", "0",
            "--osl", str(load.output_tokens), "--osl-stddev", "0",
            "--request-count", str(load.requests)]


POISSON = ["--arrival-pattern", "poisson"]


def command(load: Load, artifacts: Path, venv: Path) -> list[str]:
    """`aiperf profile ... --request-count N --request-rate R --arrival-pattern poisson`, or
    for a closed loop of U users `--concurrency U` and no rate (its `concurrency` phase: the
    next request goes out as soon as one of the U in flight is done; aiperf refuses an
    arrival pattern there)."""
    pacing = (["--concurrency", str(load.users)] if load.closed
              else ["--request-rate", f"{load.rate:g}", *POISSON])
    return [*_base(venv, load, artifacts), *_synthetic(load), *pacing]


def run(load: Load, work: Path, venv: Path) -> Measured:
    """One run of `load` against `load.url`; its output under `work/artifacts`."""
    artifacts = _fresh(work)
    _, cpu, wall = run_counted(command(load, artifacts, venv), cwd=work, env=_env(work))
    return read_summary(one_summary(artifacts), cpu, wall)


def _fresh(work: Path) -> Path:
    artifacts = work / "artifacts"
    if artifacts.exists() and any(artifacts.iterdir()):
        raise FileExistsError(f"{artifacts} is not empty: an earlier run's files would mix in")
    artifacts.mkdir(parents=True, exist_ok=True)
    return artifacts


def one_summary(root: Path) -> Path:
    found = sorted(root.rglob(SUMMARY))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one {SUMMARY} under {root}, found {len(found)}")
    return found[0]


def _load(path: Path) -> dict[str, Any]:
    data = read_json(path, TOOL)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not aiperf's JSON output (a {type(data).__name__})")
    return data


def _seconds(data: Mapping[str, Any], tag: str, path: Path) -> dict[int, float]:
    """p50/p90/p99 of metric `tag`, from the unit the file names to seconds."""
    entry = data.get(tag)
    if not isinstance(entry, dict) or entry.get("unit") not in UNIT_S:
        raise ValueError(f"{path}: no {tag!r} with a time unit in aiperf's summary")
    scale = UNIT_S[entry["unit"]]
    try:
        return {q: float(entry[f"p{q}"]) * scale for q in QUANTILES}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {tag!r} lacks a numeric percentile ({exc!r})") from exc


def _count(data: Mapping[str, Any], tag: str, path: Path, default: int | None = None) -> int:
    entry = data.get(tag)
    if entry is None and default is not None:
        return default
    try:
        return int(entry["avg"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: no count {tag!r} in aiperf's summary") from exc


def read_summary(path: Path, cpu_s: float = 0.0, wall_s: float = 0.0) -> Measured:
    """`Measured` from one `profile_export_aiperf.json`, figures as the tool wrote them."""
    data = _load(path)
    errors = _count(data, "error_request_count", path, default=0)
    notes = (_arrivals(data), *NOTES, f"aiperf counted {errors} failed requests",
             *_incomplete(data))
    return Measured(tool=TOOL, ttft=_seconds(data, "time_to_first_token", path),
                    itl=_seconds(data, "inter_token_latency", path),
                    e2e=_seconds(data, "request_latency", path),
                    ok=_count(data, "request_count", path), cpu_s=cpu_s, wall_s=wall_s,
                    raw=path, notes=notes)


def _arrivals(data: Mapping[str, Any]) -> str:
    """How the requests were sent, as the summary's own copy of its config says (Poisson for
    `run`: --arrival-pattern poisson; `concurrency` for a closed loop: --concurrency)."""
    phases = (data.get("input_config") or {}).get("phases") or ()
    phase = next((p for p in phases if isinstance(p, dict) and p.get("name") == "profiling"), {})
    rate = f" at {phase['rate']:g}/s" if isinstance(phase.get("rate"), int | float) else ""
    if phase.get("type") == "concurrency":
        rate = f" of {phase.get('concurrency', '?')} (closed loop: --concurrency)"
    return (f"arrivals: {phase.get('type', 'not recorded')}{rate}, "
            f"{phase.get('requests', '?')} requests (aiperf's input_config)")


def _incomplete(data: Mapping[str, Any]) -> tuple[str, ...]:
    if data.get("was_cancelled") or data.get("is_complete") is False:
        return (f"aiperf marked the run incomplete: {data.get('incomplete_reason')}",)
    return ()


def _profiling(data: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The profiling phase of a summary's own copy of its config (`input_config.phases`)."""
    phases = (data.get("input_config") or {}).get("phases")
    found = [p for p in phases or () if isinstance(p, dict) and p.get("name") == "profiling"]
    if len(found) != 1:
        raise ValueError(f"{path}: no profiling phase in its input_config")
    return found[0]


def offered_rate(path: Path) -> float:
    """The request rate a summary's own config says it was run at."""
    rate = _profiling(_load(path), path).get("rate")
    if not isinstance(rate, int | float):
        raise ValueError(f"{path}: no numeric rate in its profiling phase")
    return float(rate)


def _find_key(node: Any, key: str) -> Any:
    """The first value of `key` (or of a dotted path ending in it, as a search names its
    variables) in a nested JSON: the config's layout varies by version."""
    if isinstance(node, dict):
        for name, value in node.items():
            if value is not None and (name == key or name.endswith("." + key)):
                return value
        node = list(node.values())
    if isinstance(node, list):
        for child in node:
            found = _find_key(child, key)
            if found is not None:
                return found
    return None


def sweep(load: Load, rates: Sequence[float], work: Path, venv: Path) -> dict[float, Measured]:
    """AIPerf's own rate sweep: one `aiperf profile ... --request-rate 2,4,8` (a list makes it
    run the variations one after another, each with `load.requests` requests) and each
    variation's `profile_export_aiperf.json`, keyed by the rate its config records. cpu_s and
    wall_s are the whole sweep's (one process), repeated on each."""
    artifacts = _fresh(work)
    cmd = [*_base(venv, load, artifacts), *_synthetic(load), *POISSON,
           "--request-rate", ",".join(f"{r:g}" for r in rates)]
    _, cpu, wall = run_counted(cmd, cwd=work, env=_env(work), timeout=900 + 60 * len(rates))
    return read_sweep(artifacts, cpu, wall)


def read_sweep(root: Path, cpu_s: float = 0.0, wall_s: float = 0.0) -> dict[float, Measured]:
    found = sorted(root.rglob(SUMMARY))
    if not found:
        raise FileNotFoundError(f"no {SUMMARY} under {root}")
    note = f"cpu_s and wall_s of the whole sweep of {len(found)} rates"
    out = {}
    for path in found:
        m = read_summary(path, cpu_s, wall_s)
        out[offered_rate(path)] = replace(m, notes=(*m.notes, note))
    return dict(sorted(out.items()))


def slo_search(load: Load, slas: Mapping[str, float], low: float, high: float, work: Path,
               venv: Path, iterations: int = 8, initial: int = 3) -> Search:
    """AIPerf's own adaptive search over the request rate (Optuna TPE without the `botorch`
    extra), maximizing `request_throughput` under SLA filters `slas`: {'time_to_first_token:p99':
    ms, 'request_latency:p90': ms, ...} (stat after the colon, thresholds in ms as in the
    summary). Each iteration is a full run of `load.requests` Poisson requests:

        aiperf profile ... --search-space phases.profiling.rate:LOW,HIGH:real
            --search-metric request_throughput --search-direction maximize
            --search-max-iterations N --search-initial-points K --search-random-seed SEED
            --search-sla time_to_first_token:p99:lt:MS ...

    Its recipes (`--search-recipe max-goodput-under-slo` etc.) search the concurrency, not the
    rate, so the rate search is spelled out with --search-space."""
    artifacts = _fresh(work)
    cmd = [*_base(venv, load, artifacts), *_synthetic(load), *POISSON, "--request-rate",
           f"{low:g}",
           "--search-space", f"phases.profiling.rate:{low:g},{high:g}:real",
           "--search-metric", "request_throughput", "--search-direction", "maximize",
           "--search-max-iterations", str(iterations), "--search-initial-points", str(initial),
           "--search-random-seed", str(load.seed)]
    for key, ms in slas.items():
        cmd += ["--search-sla", f"{key}:lt:{ms:g}"]
    _, cpu, wall = run_counted(cmd, cwd=work, env=_env(work), timeout=900 + 120 * iterations)
    return read_search(_one(artifacts, HISTORY), cpu, wall)


def _one(root: Path, name: str) -> Path:
    found = sorted(root.rglob(name))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one {name} under {root}, found {len(found)}")
    return found[0]


def read_search(path: Path, cpu_s: float = 0.0, wall_s: float = 0.0) -> Search:
    """`Search` from AIPerf's `search_history.json`."""
    data = _load(path)
    try:
        steps = tuple((float(_find_key(i["variation_values"], "rate")), bool(i["feasible"]))
                      for i in data["iterations"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: iterations without a request_rate and feasibility") from exc
    bounds = data.get("boundary_summary") or {}
    return Search(feasible_max=_rate(bounds.get("feasible_max")),
                  infeasible_min=_rate(bounds.get("infeasible_min")),
                  breach=_breach(bounds.get("infeasible_min")), iterations=steps,
                  convergence=data.get("convergence_reason"), cpu_s=cpu_s, wall_s=wall_s,
                  raw=path)


def _rate(point: Any) -> float | None:
    # boundary points: {"value": rate on the swept axis, "iteration_idx": ..., ...}
    found = point.get("value") if isinstance(point, dict) else None
    return float(found) if isinstance(found, int | float) else None


def _breach(point: Any) -> str | None:
    """The first SLA filter the lowest infeasible rate broke, and by what it saw."""
    b = point.get("first_breach") if isinstance(point, dict) else None
    if not isinstance(b, dict):
        return None
    return f"{b.get('metric_tag')} {b.get('stat')} {b.get('observed')} not {b.get('op')} " \
           f"{b.get('threshold')}"


TRACE_TYPES = {"mooncake": "mooncake_trace", "burstgpt": "burst_gpt_trace",
               "bailian": "bailian_trace"}  # --custom-dataset-type of each format it reads
HASHED = {"mooncake", "bailian"}


def replay_trace(trace: Path, load: Load, work: Path, venv: Path, fmt: str = "mooncake",
                 block_size: int = 512) -> Measured:
    """A timestamped trace replayed on its own timestamps, shifted to start at once; `load`
    gives the target, model, tokenizer and seed (rate, counts and lengths are the trace's).
    Mooncake JSONL (`timestamp` ms, `input_length`, `output_length`, `hash_ids` of
    `block_size`-token blocks), BurstGPT CSV (`Timestamp` s, `Request tokens`, `Response
    tokens`) or Bailian; prompts are synthesized to the lengths:

        aiperf profile ... --input-file TRACE --custom-dataset-type mooncake_trace
            --fixed-schedule --fixed-schedule-auto-offset [--isl-block-size B]

    aiperf refuses a Mooncake row whose hash_ids do not fit its input_length at that block
    size. It has no loader for the Azure CSV (its TIMESTAMP is a date)."""
    if fmt not in TRACE_TYPES:
        raise ValueError(f"aiperf replays {', '.join(TRACE_TYPES)} traces, not {fmt!r}")
    artifacts = _fresh(work)
    cmd = [*_base(venv, load, artifacts), "--input-file", str(trace),
           "--custom-dataset-type", TRACE_TYPES[fmt], "--fixed-schedule",
           "--fixed-schedule-auto-offset"]
    if fmt in HASHED:  # aiperf refuses a block size for a trace without hash ids
        cmd += ["--isl-block-size", str(block_size)]
    _, cpu, wall = run_counted(cmd, cwd=work, env=_env(work))
    m = read_summary(one_summary(artifacts), cpu, wall)
    return replace(m, notes=(f"replayed {trace.name} on its timestamps (--fixed-schedule)",
                             *(TRACE_PROMPTS if n == NOTES[-1] else n for n in m.notes)))
