"""The engine's Prometheus families: the contract names, promtool-clean, moving with traffic."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from layergate.reference_engine.api import SamplingParams
from layergate.reference_engine.engine import Engine
from tests.support.engine_runs import run_requests
from tests.support.tiny_llama import tiny_config, tiny_loaded

pytestmark = [pytest.mark.prometheus]

CONTRACTS = Path(__file__).resolve().parents[1] / "docs" / "CONTRACTS.md"


def contract_engine_names() -> set[str]:
    text = CONTRACTS.read_text()
    section = text.split("## Engine Prometheus metrics")[1].split("\n## ")[0]
    return set(re.findall(r"`(layergate_[a-z_]+)`", section))


def test_engine_metrics_follow_the_contract_and_pass_promtool(promtool_bin):
    torch.set_num_threads(1)
    registry = CollectorRegistry()
    engine = Engine(tiny_config(), registry, loaded=tiny_loaded(num_layers=2))
    engine.start()
    try:
        run_requests(engine, [[5, 6, 7], list(range(10, 60))],
                     SamplingParams(max_tokens=4, temperature=0.0))
    finally:
        engine.shutdown()
    text = generate_latest(registry).decode()
    samples = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    missing = {n for n in contract_engine_names()
               if not ({n, f"{n}_bucket", f"{n}_total"} & samples)}
    assert not missing, f"engine metrics missing from /metrics: {sorted(missing)}"
    assert any(s.startswith("process_") for s in samples)
    check = subprocess.run([promtool_bin, "check", "metrics"], input=text, text=True,
                           capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr
    labels = {"policy": "full"}
    assert registry.get_sample_value("layergate_generation_tokens_total", labels) == 8
    assert registry.get_sample_value("layergate_prompt_tokens_total", labels) == 53
    assert registry.get_sample_value("layergate_layers_executed_total", labels) == 16
    assert registry.get_sample_value("layergate_time_to_first_token_seconds_count",
                                     labels) == 2
    real = registry.get_sample_value("layergate_real_tokens_total", labels)
    computed = registry.get_sample_value("layergate_computed_tokens_total", labels)
    assert 0 < real <= computed
