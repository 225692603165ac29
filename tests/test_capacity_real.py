"""`layergate capacity` on real engines: SmolLM2 at full depth against `static` with 12 of
its 30 layers skipped, one torch thread each, on a short closed-loop ladder (1, 2, 4, 8
users, no bisection) under a loose SLO: on two busy cores a CPU engine carries well under
one request a second, so a ladder of rates would spend minutes per step. What
must hold: the static arm carries no less load than full beyond the noise (the interval of
the ratio reaches 1 or above), and each arm's capacity is a number, not a bound."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporters.catalogue import BASELINE, CANDIDATE, ExitCode
from harness.capacity.state import REPORT
from tests.support.processes import EngineProcess, engine, layergate_cmd
from tests.support.replay_rig import traffic

pytestmark = [pytest.mark.model, pytest.mark.slow]

SKIPPED = ",".join(str(i) for i in range(9, 21))  # 12 middle layers


@pytest.fixture(scope="module")
def static_engine() -> Iterator[EngineProcess]:
    with engine("--skip-policy", "static", "--skip-layers", SKIPPED) as proc:
        yield proc


def test_static_carries_no_less_than_full(full_engine, static_engine, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    done = subprocess.run(layergate_cmd(
        "capacity", "--traffic", str(traffic(tmp_path / "t.jsonl", 16, 0.1)),
        "--baseline", full_engine.url, "--candidate", static_engine.url, "--out", str(out),
        "--slo", "e2e:8s", "--load", "users", "--start", "1", "--factor", "2",
        "--bisections", "0", "--warmup", "0", "--min-duration", "0", "--min-requests", "4",
        "--max-load", "8", "--resamples", "300", "--no-progress"),
        capture_output=True, text=True, timeout=300)
    print(done.stdout, done.stderr)
    assert done.returncode == ExitCode.PASS, done.stdout + done.stderr
    report = json.loads((out / REPORT).read_text())
    assert {report["arms"][a]["bound"] for a in (BASELINE, CANDIDATE)} == {"exact"}
    ratio = next(f for f in report["figures"]
                 if f["name"] == "capacity_ratio" and f["arm"] == CANDIDATE)
    assert ratio["ci_high"] >= 1.0, ratio
    realised = next(f for f in report["figures"]
                    if f["name"] == "capacity_realisation" and f["arm"] == CANDIDATE)
    assert realised["detail"]["theoretical_saving"] > 0.3  # 12 of 30 layers, by its report
