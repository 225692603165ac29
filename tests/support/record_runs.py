"""Record the runs of tests/fixtures/recorded/ (`python -m tests.support.record_runs DEST`):
echo servers as arms, 40 records. Run once; the goldens beside them are then written by
`LAYERGATE_REGEN=1 pytest tests/test_recorded_runs.py`. The sweep's step directories are
not kept: its capacity.json holds every step's requests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

from layergate.harness.processes import layergate_command
from tests.support.echo import echo_server
from tests.support.traffic import traffic


def record(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    path = traffic(dest / "traffic.jsonl", 40, 0.05)
    with ExitStack() as stack:
        def server(*args: str) -> str:
            return stack.enter_context(echo_server(*args))

        a, a2 = server("--token-delay", "0.01"), server("--token-delay", "0.01")
        fast, garbled = server("--token-delay", "0.005"), server("--token-delay", "0.01",
                                                                  "--garble")
        for out, candidates in (("same", [fast]), ("garbled", [garbled]),
                                ("family", [f"fast={fast}", f"garbled={garbled}"])):
            subprocess.run(layergate_command(
                "replay", "--traffic", str(path), "--baseline", a, "--baseline2", a2,
                *[x for c in candidates for x in ("--candidate", c)], "--out", str(dest / out),
                "--no-progress", "--seed", "3", "--processes", "1"), check=True)
        three, five = (server("--token-delay", "0.05", "--slots", n) for n in ("3", "5"))
        subprocess.run(layergate_command(
            "capacity", "--traffic", str(path), "--baseline", three, "--candidate", five,
            "--out", str(dest / "sweep"), "--slo", "ttft:300ms", "--knee-steps", "1",
            "--start", "5", "--factor", "2", "--bisections", "1", "--warmup", "1",
            "--min-duration", "3", "--min-requests", "15", "--resamples", "200",
            "--no-progress"), check=True)
    for junk in dest.rglob("locust*"):
        junk.unlink()
    for junk in dest.rglob("*.png"):
        junk.unlink()
    shutil.rmtree(dest / "sweep" / "steps")


if __name__ == "__main__":
    record(Path(sys.argv[1]))
