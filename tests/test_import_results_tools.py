"""Each load tool, run for real (its venv from benchmarks/peers, made on first use: a tool
that cannot be installed or run fails the test), three times at once against the suite's
echo servers: twice against the same server (A and A') and once against the same server made
20 % slower (its first token and every token after it). Each run is imported with `layergate
import-results` and judged by the `load-tools` policy: the A/A run (baseline A, candidate
A') must not fail (at 24 requests it passes or is inconclusive); the slowed run (baseline A,
baseline2 A', candidate the slow server) must fail on its time ratios. The arms sent the
same prompts (the tools' seeded generators), so the verdicts are paired."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from layergate.exporters.catalogue import BASELINE, BASELINE2, CANDIDATE, FAIL, PAIRED
from layergate.harness.gate.fixed.evaluation import evaluate
from layergate.harness.gate.policy import load_policy
from layergate.harness.report.wording import summary_line
from layergate.harness.results_import import ResultsImportConfig, import_results
from tests.support.echo import echo_server
from tests.support.load_tools import FAST, SLOW, run_tool

TIMES = ("latency_ratio", "ttft_latency_ratio", "tpot_latency_ratio")


def _runs(tool: str, work: Path) -> dict[str, Path]:
    """The tool's three runs, made at once: A and A' on one server, the slow one on another."""
    with echo_server(*FAST) as fast, echo_server(*SLOW) as slow, \
            ThreadPoolExecutor(3) as pool:
        jobs = {name: pool.submit(run_tool, tool, url, work / name)
                for name, url in (("a", fast), ("a2", fast), ("slow", slow))}
        return {name: job.result()[0] for name, job in jobs.items()}


def _verdict(tool: str, out: Path, arms: dict[str, Path]):
    for arm, source in arms.items():
        done = import_results(ResultsImportConfig(tool=tool, source=source, out=out, arm=arm))
    assert done.pairing == PAIRED, "the tools' seeded prompts pair the arms"
    result = evaluate(out, load_policy("load-tools"))
    checks = {c.name: c for c in result.overall if c.name in TIMES and c.arm != BASELINE2}
    print(f"{tool} {out.name}: {result.verdict}; " + "; ".join(
        f"{n} {summary_line(c)}" for n, c in checks.items()))
    return result, checks


@pytest.mark.parametrize("tool", [
    pytest.param("guidellm", marks=pytest.mark.peers),
    pytest.param("aiperf", marks=pytest.mark.peers),
    pytest.param("inference-perf", marks=pytest.mark.peers),
    pytest.param("vllm-bench", marks=pytest.mark.vllm),
])
@pytest.mark.slow
def test_a_tools_a_a_run_does_not_fail_and_a_slower_server_fails(tool: str,
                                                                   tmp_path: Path) -> None:
    runs = _runs(tool, tmp_path / "runs")
    aa, times = _verdict(tool, tmp_path / "aa", {BASELINE: runs["a"], CANDIDATE: runs["a2"]})
    assert aa.verdict != FAIL, [c.reason for c in aa.overall if c.status == FAIL]
    assert all(c.status != FAIL for c in times.values())
    slowed, times = _verdict(tool, tmp_path / "slowed", {
        BASELINE: runs["a"], BASELINE2: runs["a2"], CANDIDATE: runs["slow"]})
    assert slowed.verdict == FAIL
    assert any(c.status == FAIL for c in times.values())
    # 1.2 by the server; less where the tool adds its own time, more where the tool's own
    # process is starved beside the suite's other servers: still a slowdown, and far from a
    # unit mixed up or the arms swapped
    for name, check in times.items():
        assert check.value is None or 1.0 < check.value < 1.5, (name, check.value)
