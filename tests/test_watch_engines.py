"""`layergate watch` on real engines under a real replay, scraped by a real Prometheus
(tests/support/watch_rig.py): two full-depth SmolLM2 engines (1 torch thread each) as
baseline and candidate, every request sent to both through a proxy, two watches reading
the run at once.

- The client-side watch (the replayer's per-arm histograms): when the candidate's proxy
  starts stretching its responses 6x mid-run, it rolls back within the windows its
  statistics promise and calls the rollback hook exactly once.
- The engine-side watch (the engines' own histograms, `arm` from the scrape config): the
  engines stay identical (a proxy in front changes nothing inside them), so over many
  windows it never rolls back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from layergate.exporters.figures.canary import process_margin
from layergate.exporters.figures.sequential import windows_needed
from layergate.harness.stack.engines import start_engine
from layergate.harness.watch.policy import DEFAULT_PROCESS_SPREAD
from layergate.harness.watch.stages import MIN_N_OPT, PROCESS_SHARE
from tests.support.watch_rig import Rig, RigResult, run_rig

pytestmark = [pytest.mark.prometheus, pytest.mark.locust]

ALPHA, GATING = 0.05, 3
RIG = Rig(policy={"name": "test-engines", "alpha": ALPHA, "metrics": {
    "e2e_ratio": {"direction": "<=", "threshold": 1.5},
    "ttft_ratio": {"direction": "<=", "threshold": 1.5},
    "tpot_ratio": {"direction": "<=", "threshold": 1.5},
    "error_rate_delta": {"direction": "<=", "threshold": 0.5, "critical": False}}})
SLOWDOWN = 5.0  # the proxy's extra share of time once the candidate turns bad: 6x


@pytest.fixture(scope="module")
def candidate_engine(full_engine) -> Iterator:
    """A second full engine, warmed up like the shared one: a first request is slow (lazy
    initialisation, an empty prefix cache), and the baseline has long served others."""
    proc = start_engine("--skip-policy", "full")
    body = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": RIG.max_tokens}
    for url in (full_engine.url, proc.url):
        for _ in range(2):
            httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120).raise_for_status()
    yield proc
    proc.stop()


@pytest.mark.model
def test_client_side_watch_rolls_back_and_engine_side_watch_does_not(
        full_engine, candidate_engine, tmp_path: Path, prometheus_bin: str) -> None:
    result = run_rig(RIG, full_engine.url, candidate_engine.url, tmp_path, SLOWDOWN)
    client = result.client
    assert client["verdict"] == "fail", result.log("client")
    assert result.hooks("client") == ["rollback 50"]  # once, though the run went on
    assert result.client_code == 1, result.log("client")
    _assert_within_promise(result)

    # identical engines may well be decided good (the stage then advances): never bad
    engine, final = result.engine, json.loads((tmp_path / "engine.json").read_text())
    assert engine["verdict"] != "fail" and final["verdict"] != "fail", result.log("engine")
    assert "rollback" not in [t["decision"] for t in final["transitions"]]
    assert engine["windows"] >= RIG.engine_min_windows, result.log("engine")  # many windows
    assert "rollback 50" not in result.hooks("engine")


def _assert_within_promise(result: RigResult) -> None:
    """The rollback came no later than the t-mixture promises for the windows it saw: the
    first interval restarted after the turn holds only slow windows, and needs
    `windows_needed(gap, sd)` of them at its share of the error budget, the gap less the
    between-process margin (the rig's policy keeps the default `process_spread`)."""
    status, turned_at = result.client, result.turned_at
    name = status["reasons"][0].split(":")[0]
    figure = status["figures"][name]
    after = [math.log(x) for x in figure["per_window"][turned_at + 1:] if x]
    mean = sum(after) / len(after)
    gap = mean - math.log(figure["threshold"])
    sd = (sum((x - mean) ** 2 for x in after) / len(after)) ** 0.5
    assert gap > 0, f"{name} did not get worse: {figure}\n{result.log('client')}"
    restart = MIN_N_OPT * math.ceil((turned_at + 1) / MIN_N_OPT)
    j = restart // MIN_N_OPT
    alpha = ALPHA * (1 - PROCESS_SHARE) / GATING / 2 * 6 / (math.pi ** 2 * j * j)
    margin = process_margin(DEFAULT_PROCESS_SPREAD, ALPHA * PROCESS_SHARE)
    promise = restart + windows_needed(gap - margin, sd, alpha, MIN_N_OPT)
    assert turned_at < status["windows"] <= promise, (
        f"rolled back at window {status['windows']}, turn at {turned_at}, promise {promise} "
        f"(gap {gap:.3f}, sd {sd:.3f})\n{result.log('client')}")
