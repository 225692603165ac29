"""How the stack starts one arm's reference engine: `layergate serve` with explicit threads."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from exporters.catalogue import FULL_DEPTH


@dataclass(frozen=True)
class EngineSpec:
    """One arm. `url` set means the engine runs elsewhere and the stack only scrapes it."""

    arm: str
    skip_policy: str = FULL_DEPTH
    extra_args: tuple[str, ...] = ()
    threads: int = 1
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def command(self, port: int) -> list[str]:
        return [sys.executable, "-m", "harness.cli", "serve", "--host", "127.0.0.1",
                "--port", str(port), "--threads", str(self.threads),
                "--skip-policy", self.skip_policy, *self.extra_args]

    def process_env(self) -> dict[str, str]:
        # BLAS / OpenMP pools must not oversubscribe the cores the engines share
        threads = str(self.threads)
        return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **self.env}
