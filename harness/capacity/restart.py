"""`capacity --replicates R --restart CMD`: fresh server processes for every replicate.

An engine process runs a percent or two faster or slower than another for its whole life
(docs/METRICS.md, "Between-process variance"). Replicates on the same servers all carry
their processes' offset, so the interval across them adds it as a known term
(`--process-spread`), and is only as good as that prior: simulated with processes spread
twice as far as the prior says, it covered the truth in 79-83 % of sweeps (VALIDITY.md).
Restarted before each replicate, the arms draw new processes for it, the replicates' own
spread carries the processes', and the interval needs no prior.
"""

from __future__ import annotations

import time

from layergate.exporters.errors import InfrastructureError
from layergate.harness.processes import run_captured
from layergate.harness.readiness import models_url, wait_up

POLL_S = 1.0


class RestartFailed(InfrastructureError):
    """The restart command failed, or an arm did not come back within the timeout."""


def restart_arms(command: str, arms: dict[str, str], timeout: float) -> float:
    """Run `command` (a shell command line that returns once the arms' old processes are
    gone, as `docker compose restart` does), then wait until every arm answers; the seconds
    both took."""
    began = time.monotonic()
    done = run_captured(["/bin/sh", "-c", command], timeout)
    if done.returncode is None:
        raise RestartFailed(f"--restart {command!r} did not end within {timeout:g}s")
    if done.returncode != 0:
        said = done.output.strip()[-300:]
        raise RestartFailed(f"--restart {command!r} exited {done.returncode}"
                            + (f": {said}" if said else ""))
    probes = {models_url(url): arm for arm, url in arms.items()}
    left = max(0.0, timeout - (time.monotonic() - began))
    down = wait_up(list(probes), left, POLL_S)
    if down:
        raise RestartFailed(f"after --restart {command!r}, not answering within {timeout:g}s: "
                            + "; ".join(f"{probes[p]}: {why}" for p, why in down.items()))
    return time.monotonic() - began
