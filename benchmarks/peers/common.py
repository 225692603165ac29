"""What every load generator in the side-by-side is asked to do (`Load`), what comes back
(`Measured`), and the truth both are held to: the echo server's own timeline
(tests/support/echo_server.py `--timeline`), which records when each request arrived and
when its first and last token went out.

A tool's adapter (`benchmarks/peers/<tool>.py`) runs the tool in its own venv as a child
process and reads the tool's own output files into `Measured`; it never recomputes a
figure from anything but what the tool wrote. Its CPU is the child processes' user + system
time (`resource.getrusage(RUSAGE_CHILDREN)` around the run, so every process the tool
started and reaped counts)."""

from __future__ import annotations

import json
import resource
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

QUANTILES = (50, 90, 99)
# the bundled model's tokenizer, which tools that count tokens are given (no hub here)
TOKENIZER = Path.home() / ".cache" / "layergate" / "models" / "smollm2-135m"


@dataclass(frozen=True)
class Load:
    """One run of a tool against one server: `requests` requests, each a prompt of about
    `prompt_tokens` tokens asking for exactly `output_tokens`. Sent open loop at `rate` per
    second (Poisson where the tool has it, else constant) when `users` is 0; else closed
    loop: `users` concurrent users, each sending its next request when its last is done, as
    fast as the server answers (`rate` unused), through the tool's own concurrency option."""

    url: str  # base URL of an OpenAI-compatible server, no /v1
    model: str
    rate: float
    requests: int
    prompt_tokens: int
    output_tokens: int
    tokenizer: Path  # a local Hugging Face tokenizer directory (no hub access here)
    seed: int = 0
    users: int = 0  # 0: open loop at `rate`; N: closed loop of N users

    @property
    def closed(self) -> bool:
        return self.users > 0


@dataclass(frozen=True)
class Measured:
    """What a tool reported, in seconds: percentile -> value for each latency."""

    tool: str
    ttft: dict[int, float]
    itl: dict[int, float]
    e2e: dict[int, float]
    ok: int  # requests the tool counted as successful
    cpu_s: float  # CPU seconds of the tool's processes
    wall_s: float
    raw: Path  # the tool's own output, as it wrote it
    notes: tuple[str, ...] = field(default_factory=tuple)


def percentiles(values: Sequence[float]) -> dict[int, float]:
    arr = np.asarray(values, dtype=float)
    return {q: float(np.percentile(arr, q)) for q in QUANTILES} if arr.size else {}


@dataclass(frozen=True)
class Truth:
    """The server's own view of the same run."""

    ttft: dict[int, float]
    itl: dict[int, float]
    e2e: dict[int, float]
    requests: int
    arrivals: tuple[float, ...]  # wall-clock arrival of each request, in order


def read_truth(timeline: Path, since: float = 0.0) -> Truth:
    """The timeline's requests that arrived at or after `since` (wall clock)."""
    rows = [json.loads(line) for line in timeline.read_text().splitlines() if line.strip()]
    rows = sorted((r for r in rows if r["arrived"] >= since), key=lambda r: r["arrived"])
    itl = [(r["last"] - r["first"]) / (r["tokens"] - 1) for r in rows if r["tokens"] > 1]
    return Truth(ttft=percentiles([r["first"] - r["arrived"] for r in rows]),
                 itl=percentiles(itl),
                 e2e=percentiles([r["last"] - r["arrived"] for r in rows]),
                 requests=len(rows), arrivals=tuple(r["arrived"] for r in rows))


def run_counted(cmd: Sequence[str], cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 900) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run `cmd` to its end; (the process, its processes' CPU seconds, wall seconds). A
    failed run raises with the tail of its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(list(cmd), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-3000:]}")
    return proc, cpu, wall


class OutputError(ValueError):
    """A tool's output file is missing or not what the tool writes."""


def read_json(path: Path, tool: str) -> Any:
    """The JSON a tool wrote at `path`; a missing or unreadable file is named."""
    if not path.is_file():
        raise OutputError(f"{path}: {tool} wrote no such file")
    try:
        return json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OutputError(f"{path}: not readable as {tool}'s JSON ({exc})") from exc


def fresh(path: Path) -> Path:
    """`path` made as a new, empty directory (a run's own work directory)."""
    path.mkdir(parents=True)
    return path
