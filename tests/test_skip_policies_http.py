"""Policies over the real HTTP API: `--dry-run` decides and reports but runs full depth, so
its outputs are those of the shared full-depth engine and only the would-skip counters move;
`speculative` with the bundled calibrated rules serves identical greedy output."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from layergate.harness.stack.engines import engine

pytestmark = [pytest.mark.model]

QUESTIONS = ["What is a Python decorator?",
             "Can I update the shipping address on an order that's already been placed?",
             "Summarise in one sentence: the if statement is used for conditional execution."]


def _chat(url: str, text: str) -> dict:
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": 8, "temperature": 0}
    r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def _metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == name)


def test_dry_run_outputs_full_and_moves_would_skip(full_engine):
    with engine("--skip-policy", "static", "--skip-layers", "13,14", "--dry-run") as dry:
        before = _metric(dry.url, "layergate_layers_would_skip_total")
        for q in QUESTIONS:
            got, ref = _chat(dry.url, q), _chat(full_engine.url, q)
            ext = got["layergate"]
            assert ext["token_ids"] == ref["layergate"]["token_ids"]
            assert got["choices"][0]["message"] == ref["choices"][0]["message"]
            assert ext["dry_run"] is True and ext["would_skip_layers"] == [13, 14]
            assert ext["layer_mask"] == [1] * 30
            assert ext["layers_executed_per_token"] == [30] * len(ext["token_ids"])
        after = _metric(dry.url, "layergate_layers_would_skip_total")
        assert after > before
        assert _metric(dry.url, "layergate_layers_skipped_total") == 0


def test_speculative_with_bundled_rules_serves_full_output(full_engine):
    with engine("--skip-policy", "speculative") as spec:
        for q in QUESTIONS:
            got, ref = _chat(spec.url, q), _chat(full_engine.url, q)
            assert got["layergate"]["token_ids"] == ref["layergate"]["token_ids"]
            assert got["layergate"]["policy"] == "speculative"
        assert _metric(spec.url, "layergate_draft_tokens_total") > 0
        assert _metric(spec.url, "layergate_drafts_total") > 0
        assert got["layergate"]["draft_steps"] > 0
