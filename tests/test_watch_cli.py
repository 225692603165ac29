"""`layergate watch` before its first window: the mapping file, selectors, and every usage
error (exit 2) that names what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from layergate.exporters.catalogue import LIVE_FIGURES, ROLES
from layergate.exporters.figures.canary import available
from layergate.harness.cli import main
from layergate.harness.watch.metric_map import (
    MetricMapError,
    default_map_path,
    load_engine_metrics,
    normalise_selector,
)

BASE = ["watch", "--prometheus", "http://127.0.0.1:9", "--baseline", 'arm="baseline"',
        "--candidate", 'arm="candidate"']


def test_every_engine_of_the_mapping_file_loads_and_gives_the_latency_ratios() -> None:
    engines = yaml.safe_load(default_map_path().read_text())
    assert set(engines) == {"layergate", "layergate-replay", "vllm", "tgi"}
    for name in engines:
        roles = load_engine_metrics(name).roles
        assert roles <= set(ROLES)
        assert available(LIVE_FIGURES["e2e_ratio"], roles)
        assert available(LIVE_FIGURES["tpot_ratio"], roles)
        assert available(LIVE_FIGURES["error_rate_delta"], roles)
    tgi = load_engine_metrics("tgi").roles
    assert not available(LIVE_FIGURES["ttft_ratio"], tgi)
    assert not available(LIVE_FIGURES["cache_hit_rate_delta"], tgi)


def test_queries_add_the_arm_selector_and_accept_both_spellings_of_vllm_names() -> None:
    vllm = load_engine_metrics("vllm").queries('job="canary"', "60000ms")
    assert vllm["e2e_sum"] == ('sum(increase({__name__=~"vllm[:_]e2e_request_latency_seconds_sum"'
                               ', job="canary"}[60000ms]))')
    assert vllm["errors"] == ('sum(increase(http_requests_total{handler=~"/v1/.+",status="5xx", '
                              'job="canary"}[60000ms]))')
    ours = load_engine_metrics("layergate").queries('arm="b"', "2s")
    assert ours["tpot_count"] == ("sum(increase(layergate_time_per_output_token_seconds_count"
                                  '{arm="b"}[2s]))')


def test_selectors_are_label_matchers() -> None:
    assert normalise_selector(' {arm="x"} ', "--candidate") == 'arm="x"'
    with pytest.raises(MetricMapError, match="--baseline: empty selector"):
        normalise_selector("{}", "--baseline")
    with pytest.raises(MetricMapError, match="not a list of label matchers"):
        normalise_selector('up{arm="x"}', "--candidate")


def test_mapping_file_mistakes_are_named(tmp_path: Path) -> None:
    with pytest.raises(MetricMapError, match="no engine 'vlm'.*did you mean 'vllm'"):
        load_engine_metrics("vlm")
    bad = tmp_path / "names.yaml"
    bad.write_text(yaml.safe_dump({"mine": {"e2e": "x_seconds", "ttfb": "y"}}))
    with pytest.raises(MetricMapError, match="mine.ttfb: unknown role"):
        load_engine_metrics("mine", bad)
    bad.write_text(yaml.safe_dump({"mine": {"e2e": "not a name"}}))
    with pytest.raises(MetricMapError, match="is not a metric name"):
        load_engine_metrics("mine", bad)
    bad.write_text(yaml.safe_dump({"mine": {"ttft": "x_seconds"}}))
    with pytest.raises(MetricMapError, match="needs at least e2e or requests"):
        load_engine_metrics("mine", bad)


@pytest.mark.parametrize(("extra", "message"), [
    (["--baseline", 'arm="candidate"'], "select the same series"),
    (["--stages", "5,x"], "expected percentages"),
    (["--stages", "100"], "at least one stage below 100"),
    (["--stages", "50,5"], "stages must increase"),
    (["--window", "0s"], "must be longer than 0"),
    (["--window", "soon"], "is not a duration"),
    (["--min-windows", "9", "--max-windows", "3"], "min windows <= max windows"),
    (["--engine", "tgi"], "ttft_ratio: critical and required, but engine tgi exposes no ttft"),
    (["--engine", "vllm2"], "no engine 'vllm2'"),
    (["--policy", "/nonexistent/watch.yaml"], "cannot read policy file"),
])
def test_usage_errors_exit_2_before_asking_prometheus(extra: list[str], message: str) -> None:
    result = CliRunner().invoke(main, [*BASE, *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output.replace("\n", " ").replace("  ", " ")


def test_help_explains_exit_codes_and_the_shadow_only_figures() -> None:
    result = CliRunner().invoke(main, ["watch", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for words in ("0 pass (every stage advanced: promote)", "1 rolled back", "2 usage error",
                  "3 inconclusive", "4 no data, a failed hook, or one left unfinished",
                  "--on-unfinished-hook", "--state FILE"):
        assert words in text
    assert "stay with `layergate gate`" in text
