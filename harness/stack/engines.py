"""How the stack starts one arm's reference engine: `layergate serve` with explicit threads."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from reference_engine.config import EngineConfig

FULL_DEPTH = EngineConfig.skip_policy  # the baselines' skip policy: every layer


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
