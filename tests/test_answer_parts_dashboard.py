"""The A/B dashboard's "What answers are made of" row against a real Prometheus scraping a
run's figures (`metrics --serve`, here a run whose answers call tools, answer in JSON for a
response_format and reason, the candidate changing some calls and thinking longer): every
query of the row runs and shows data, the noise floor's included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from layergate.exporters.catalogue import ANSWER_PART_FIGURES, BASELINE2, CANDIDATE, OVERALL
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.metrics_server import serve_metrics
from layergate.exporters.prometheus_export import register_run
from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import ToolCall
from tests.support.dashboard_rows import BOARD, assert_queries_answer, row_panels

pytestmark = [pytest.mark.prometheus]

ROW = "What answers are made of"
TITLES = ["Tool-call agreement vs baseline", "Tool-call validity",
          "Structured output: validity / agreement", "Answer match vs baseline",
          "Reasoning kept", "Reasoning length ratio vs baseline",
          "Time to first answer token vs TTFT (p50)"]


def _results(n: int = 30) -> list[ArmResult]:
    """n tool-calling requests after reasoning (the candidate changes every third call's
    city and thinks twice as long) and n requests for JSON (every fifth candidate answer
    another value)."""
    out = []
    for i in range(n):
        for arm in ("baseline", BASELINE2, CANDIDATE):
            changed = arm == CANDIDATE and i % 3 == 0
            out.append(ArmResult(
                request_id=f"call-{i:02d}", arm=arm, scenario="tools", ok=True, ttft_s=0.05,
                answer_ttft_s=0.3 + 0.01 * (i % 4), e2e_s=0.6, itl_s=(0.05,) * 5,
                output_tokens=12, prompt_tokens=30, finish_reason="tool_calls",
                tokens_from="usage", reasoning_text="Let me think." * (2 if arm == CANDIDATE
                                                                     else 1),
                reasoning_tokens=8 if arm == CANDIDATE else 4,
                tool_calls=(ToolCall("get_weather", json.dumps(
                    {"city": "Lyon" if changed else "Paris"}), "c0"),),
                schema_valid={"tool_calls": True}))
            value = 3 if arm == CANDIDATE and i % 5 == 0 else 2
            out.append(ArmResult(
                request_id=f"json-{i:02d}", arm=arm, scenario="json", ok=True, ttft_s=0.04,
                answer_ttft_s=0.04, e2e_s=0.3, itl_s=(0.05,) * 3, output_text=f'{{"n": {value}}}',
                output_tokens=5, prompt_tokens=20, finish_reason="stop", tokens_from="usage",
                schema_valid={"structured": True}))
    return out


def test_the_row_shows_what_answers_are_made_of(tmp_path: Path, prometheus_bin: str) -> None:
    figures = compute_figures(_results(), config=MetricsConfig(n_resamples=200))
    got = {f.name: f for f in figures if f.arm == CANDIDATE and f.scenario == OVERALL}
    assert set(ANSWER_PART_FIGURES) <= set(got)  # the run has every one of them
    assert got["tool_call_agreement"].value == pytest.approx(2 / 3)  # 10 of 30 changed
    panels = row_panels(json.loads(BOARD.read_text()), ROW)
    assert [p["title"] for p in panels] == TITLES
    exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
    for name in (*ANSWER_PART_FIGURES, "ttfat_p50", "ttft_p50"):
        assert f"layergate_run_{name}{{" in exprs, name
    assert 'layergate_run_tool_call_agreement{run=~"$run", arm="baseline2"' in exprs
    registry = CollectorRegistry()
    register_run(registry, "parts", figures)
    server = serve_metrics(registry, "127.0.0.1", 0)
    try:
        assert_queries_answer(panels, server.port, "layergate_run_tool_call_agreement",
                              tmp_path)
    finally:
        server.stop()
