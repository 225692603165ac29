"""The A/B dashboard's "Conversations turn by turn" row against a real Prometheus scraping a
run's figures (`metrics --serve`; a run of 3-turn conversations whose candidate drifts from
turn 2 on): the per-turn figures are exported with a `turn` label, and every query of the
row runs and shows data, the noise floor's included; OpenTelemetry's export likewise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry

from layergate.exporters.catalogue import (
    AGREEMENT_AT_TURN,
    BASELINE,
    BASELINE2,
    CANDIDATE,
    CONVERSATION_DIVERGENCE_TURN,
    OVERALL,
    per_turn,
)
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.metrics_server import serve_metrics
from layergate.exporters.otel_export import OtelRunExporter
from layergate.exporters.prometheus_export import register_run
from layergate.exporters.records import ArmResult
from tests.support.dashboard_rows import BOARD, assert_queries_answer, row_panels

pytestmark = [pytest.mark.prometheus]

ROW = "Conversations turn by turn"
TITLES = ["Agreement with the baseline by turn", "Conversation divergence turn",
          "TTFT by turn", "Prompt tokens by turn"]


def _run(conversations: int = 12, turns: int = 3) -> tuple[list[ArmResult], dict]:
    """Every arm answers every turn; the candidate answers otherwise from turn 2 on in
    every other conversation."""
    results, positions = [], {}
    for c in range(conversations):
        for t in range(1, turns + 1):
            rid = f"c{c:02d}-t{t}"
            positions[rid] = (f"conversation {c}", t)
            for arm in (BASELINE, BASELINE2, CANDIDATE):
                other = arm == CANDIDATE and c % 2 == 0 and t >= 2
                results.append(ArmResult(
                    request_id=rid, arm=arm, scenario="chat", ok=True, ttft_s=0.05 * t,
                    e2e_s=0.5, itl_s=(0.05,) * 4, output_text="other" if other else "same",
                    output_tokens=5, prompt_tokens=100 * t, finish_reason="stop",
                    tokens_from="usage"))
    return results, positions


def test_the_row_shows_the_conversations_turn_by_turn(tmp_path: Path,
                                                      prometheus_bin: str) -> None:
    results, positions = _run()
    figures = compute_figures(results, config=MetricsConfig(n_resamples=200, min_samples=1),
                              positions=positions)
    got = {f.name: f for f in figures if f.arm == CANDIDATE and f.scenario == OVERALL}
    assert [got[per_turn(AGREEMENT_AT_TURN, k)].value for k in (1, 2, 3)] == [1.0, 0.5, 0.5]
    assert got[CONVERSATION_DIVERGENCE_TURN].value == pytest.approx(3.0)  # (2 + 4) / 2
    panels = row_panels(json.loads(BOARD.read_text()), ROW)
    assert [p["title"] for p in panels] == TITLES
    registry = CollectorRegistry()
    register_run(registry, "turns", figures)
    # a per-turn figure is one family with the turn as a label (no `[k]` in a metric name)
    labels = {"run": "turns", "arm": CANDIDATE, "scenario": OVERALL}
    assert registry.get_sample_value("layergate_run_agreement_at_turn",
                                     {**labels, "turn": "2"}) == 0.5
    assert registry.get_sample_value("layergate_run_prompt_tokens_at_turn",
                                     {**labels, "arm": BASELINE, "turn": "3"}) == 300
    server = serve_metrics(registry, "127.0.0.1", 0)
    try:
        assert_queries_answer(panels, server.port, "layergate_run_agreement_at_turn",
                              tmp_path)
    finally:
        server.stop()


def test_otel_exports_a_per_turn_figure_as_one_instrument_with_the_turn() -> None:
    results, positions = _run()
    figures = compute_figures(results, config=MetricsConfig(n_resamples=50, min_samples=1),
                              positions=positions)
    memory = InMemoryMetricReader()
    exporter = OtelRunExporter("turns", figures, readers=[memory])
    try:
        points = {(m.name, p.attributes.get("arm"), p.attributes.get("turn")): p.value
                  for rm in memory.get_metrics_data().resource_metrics
                  for sm in rm.scope_metrics for m in sm.metrics for p in m.data.data_points
                  if p.attributes.get("scenario") == OVERALL}
    finally:
        exporter.shutdown()
    assert points[("layergate.run.agreement_at_turn", CANDIDATE, 2)] == 0.5
    assert points[("layergate.run.conversation_divergence_turn", CANDIDATE, None)] == 3.0
