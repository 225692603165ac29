"""The four load tools (benchmarks/peers: each in its venv under the suite's cache, made on
first use) run against an echo server for `layergate import-results`: each asked for the same
small load, every output the reader needs written (GuideLLM's report, AIPerf's artifacts with
the answers, inference-perf's per-request metrics, vllm bench's detailed result with the
settings it does not record given as --metadata). `run_tool` returns what to import.

    python -m tests.support.load_tools DIR [TOOL ...]   # record runs as fixtures in DIR/TOOL
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from pathlib import Path
from types import ModuleType

from benchmarks.peers import aiperf, guidellm, inference_perf, venvs, vllm_bench
from benchmarks.peers.common import TOKENIZER, Load, run_counted

ADAPTERS: dict[str, ModuleType] = {"guidellm": guidellm, "aiperf": aiperf,
                                   "inference-perf": inference_perf,
                                   "vllm-bench": vllm_bench}
# small: the suite runs each tool three times (requests at 8/s, 8 tokens each)
LOAD = Load(url="", model="echo", rate=8.0, requests=24, prompt_tokens=16, output_tokens=8,
            tokenizer=TOKENIZER, seed=0)
# the echo server's timing, and the same made 20 % slower. Slow enough that a starved tool's
# own delay is small beside it: at 50 ms + 10 ms a token, three tools at once beside the
# suite read A against A' 20 % apart and the slower server as 0.89 to 1.71
FAST = ("--first-token-delay", "0.2", "--token-delay", "0.04")
SLOW = ("--first-token-delay", "0.24", "--token-delay", "0.048")


def venv(tool: str) -> Path:
    """The tool's venv, made on first use (a failed install fails the caller)."""
    return venvs.ensure(ADAPTERS[tool], log=lambda *_: None)


def run_tool(tool: str, url: str, work: Path, load: Load = LOAD) -> tuple[Path, str]:
    """Run `tool` on `load` against `url` in `work`; (what to import, the command)."""
    load = dataclasses.replace(load, url=url)
    work.mkdir(parents=True, exist_ok=True)
    return RUNS[tool](load, work, venv(tool))


def _guidellm(load: Load, work: Path, env: Path) -> tuple[Path, str]:
    report = work / guidellm.REPORT
    cmd = guidellm.command(env, load, report, {"kind": "poisson", "rate": [load.rate]},
                           {"kind": "synthetic_text", "prompt_tokens": load.prompt_tokens,
                            "output_tokens": load.output_tokens},
                           "--constraint", guidellm._max_requests(load.requests))
    run_counted(cmd, cwd=work, env=guidellm._env(guidellm.WORKERS))
    return report, "GUIDELLM__MAX_WORKER_PROCESSES=1 " + shlex.join(cmd)


def _aiperf(load: Load, work: Path, env: Path) -> tuple[Path, str]:
    artifacts = work / "artifacts"
    artifacts.mkdir()
    cmd = [*aiperf.command(load, artifacts, env), "--export-outputs-json",
           "--extra-inputs", "ignore_eos:true"]
    run_counted(cmd, cwd=work, env=aiperf._env(work))
    return artifacts, shlex.join(cmd)


def _inference_perf(load: Load, work: Path, env: Path) -> tuple[Path, str]:
    rate, duration = inference_perf.stage_of(load)
    reports = work / "reports"
    cfg = inference_perf.config(load, reports, {"type": "poisson", "stages": [
        {"rate": rate, "duration": duration}]})
    cfg["report"]["request_lifecycle"] |= {"per_request": True, "per_request_fields": {
        "computed_metrics": True, "response_chunks": False}}
    inference_perf.invoke(cfg, work, env)
    return reports, f"inference-perf --config_file config.yml  # config.yml: {cfg}"


def _vllm_bench(load: Load, work: Path, env: Path) -> tuple[Path, str]:
    cmd = [*vllm_bench.bench_args(load, env), *vllm_bench.saving(work), "--metadata",
           "dataset_name=random", f"seed={load.seed}",
           f"random_input_len={load.prompt_tokens}",
           f"random_output_len={load.output_tokens}", "ignore_eos=true", "num_warmups=0"]
    run_counted(cmd, cwd=work, env=vllm_bench.tool_env(env))
    return work / vllm_bench.RESULT, shlex.join(cmd)


RUNS = {"guidellm": _guidellm, "aiperf": _aiperf, "inference-perf": _inference_perf,
        "vllm-bench": _vllm_bench}


# what a fixture keeps of each tool's output (relative to what run_tool returns)
KEEP = {"guidellm": ("",), "vllm-bench": ("",),
        "aiperf": ("profile_export.jsonl", "profile_export_aiperf.json", "inputs.json",
                   "outputs.json"),
        "inference-perf": ("per_request_lifecycle_metrics.json", "config.yaml")}


def record(out: Path, tool: str, requests: int = 8) -> Path:
    """One run of `tool` (`requests` requests) against the fast echo server, its output kept
    in out/TOOL with a README naming the command; the folder (or file) to import."""
    import shutil

    from tests.support.echo import echo_server

    load = dataclasses.replace(LOAD, requests=requests)
    with echo_server(*FAST) as url:
        source, said = run_tool(tool, url, out / tool / "work", load)
    keep = out / tool
    for name in KEEP[tool]:
        found = source / name if name else source
        shutil.copy(found, keep / found.name)
    shutil.rmtree(out / tool / "work")
    (keep / "README.md").write_text(
        f"# {tool} {ADAPTERS[tool].VERSION}: one recorded run\n\n"
        f"Written here by `python -m tests.support.load_tools DIR {tool}`: {requests} "
        f"requests, Poisson at {load.rate:g}/s, {load.prompt_tokens} prompt and "
        f"{load.output_tokens} output tokens, streamed, against `tests/support/echo_server.py "
        f"{' '.join(FAST)}`. The command (the port was the server's of the moment):\n\n"
        f"```\n{said}\n```\n\nKept as the tool wrote them: "
        f"{', '.join(n or source.name for n in KEEP[tool])}.\n")
    return keep


if __name__ == "__main__":
    for name in sys.argv[2:] or RUNS:
        print(record(Path(sys.argv[1]).resolve(), name))
