"""Figures for arms layergate did not write: every figure has a value computed from what the
arm returned, or is not computable with the reason in words. The servers' /metrics shapes
(tests/fixtures/metrics/: vLLM, SGLang, llama.cpp's llama-server, TGI; each file says where
its names come from) through the one counter table; results shaped as foreign servers
answer (no extension, no token ids, counts from usage, a tokenizer or characters)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from layergate.exporters.catalogue import (
    CHARACTERS,
    FIGURES,
    SEED_IGNORED,
    TOKENIZER,
    USAGE,
)
from layergate.exporters.figures.answer_tally import answer_summary, describe
from layergate.exporters.figures.cache_hit import delta, hit_rate
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.prom_text import CACHE_COUNTERS, NO_METRICS_ENDPOINT
from layergate.exporters.records import ArmResult, MetricsScrape
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.determinism import mark_seed_ignored

METRICS = Path(__file__).resolve().parent / "fixtures" / "metrics"


def scrapes(arm: str, before: str, after: str) -> list[MetricsScrape]:
    return [MetricsScrape(arm, "before", (METRICS / before).read_text()),
            MetricsScrape(arm, "after", (METRICS / after).read_text())]


@pytest.mark.parametrize(("before", "after", "rate"), [
    ("vllm.prom", "vllm_after.prom", 300 / 400),
    ("sglang.prom", "sglang_after.prom", 350 / 500),  # cached tokens of every cache_source
])
def test_hit_rate_from_each_server_s_own_counters(before: str, after: str, rate: float) -> None:
    assert hit_rate(scrapes("candidate", before, after), "candidate") == (
        pytest.approx(rate), "")


@pytest.mark.parametrize(("scrape", "says"), [
    ("llamacpp_server.prom", "exposes no prefix-cache counters in /metrics (llama.cpp's "
                             "llama-server"),
    ("tgi.prom", "exposes no prefix-cache counters in /metrics (Text Generation Inference"),
])
def test_a_server_without_counters_says_so(scrape: str, says: str) -> None:
    value, why = hit_rate(scrapes("candidate", scrape, scrape), "candidate")
    assert value is None and why.startswith(f"arm 'candidate' {says}")


def test_no_metrics_endpoint_is_said_not_failed() -> None:
    text = f"{NO_METRICS_ENDPOINT}: GET http://127.0.0.1:1/metrics answered 404\n"
    run = [MetricsScrape("candidate", w, text) for w in ("before", "after")]
    assert hit_rate(run, "candidate") == (None, "arm 'candidate' has no /metrics endpoint "
                                                "(HTTP 404): no counters to read")


def test_the_recording_rules_read_the_same_counters() -> None:
    rules = (Path(__file__).resolve().parents[1] / "dashboards" / "rules.yml").read_text()
    for server in CACHE_COUNTERS:
        assert server.hits[0] in rules and server.queries[0] in rules, server.server


def test_the_recording_rules_read_the_same_speculative_counters() -> None:
    from layergate.exporters.spec_counters import SPEC_COUNTERS

    rules = (Path(__file__).resolve().parents[1] / "dashboards" / "rules.yml").read_text()
    counting = [s for s in SPEC_COUNTERS if s.drafts]
    assert {s.server for s in counting} == {"layergate", "vLLM", "SGLang"}
    for server in counting:
        # SGLang counts no accepted tokens: its length is tokens per verification
        tokens = server.accepted or server.emitted
        for names in (server.drafts, server.draft_tokens, tokens,
                      server.acceptance_rate_gauge):
            assert not names or names[0] in rules, (server.server, names[0])


def test_cache_hit_delta_across_two_servers() -> None:
    h_a = hit_rate(scrapes("baseline", "vllm.prom", "vllm_after.prom"), "baseline")[0]
    h_x = hit_rate(scrapes("candidate", "sglang.prom", "sglang_after.prom"), "candidate")[0]
    assert delta(h_a, h_x)[0] == pytest.approx(abs(0.7 - 0.75) / 0.75)
    assert {c.server for c in CACHE_COUNTERS} == {"layergate", "vLLM", "SGLang"}


TEXTS = ["The colour is blue", "Paris is the capital", "Two plus two is four",
         "A cat sat on the mat", "Hello there friend"]


def ours(i: int, arm: str = "baseline") -> ArmResult:
    """An answer of layergate's engine: token ids, the extension, usage."""
    words = TEXTS[i % len(TEXTS)].split()
    return ArmResult(f"r{i}", arm, "s", ok=True, e2e_s=1.0 + i / 10, ttft_s=0.2,
                     itl_s=(0.1,) * (len(words) - 1), output_text=" ".join(words),
                     output_tokens=len(words), prompt_tokens=20, finish_reason="stop",
                     token_ids=tuple(range(len(words))), tokens_from=USAGE,
                     extension={"theoretical_saving": 0.0, "computed_tokens": 25,
                                "peak_memory_bytes": 1000, "prefix_cache_hit_tokens": 0,
                                "prefix_cache_query_tokens": 20})


def foreign(i: int, tokens_from: str = CHARACTERS) -> ArmResult:
    """The same text from a server without extension, ids or logprobs."""
    text = TEXTS[i % len(TEXTS)] if i % 3 else TEXTS[i % len(TEXTS)] + " indeed"
    count = len(text) if tokens_from == CHARACTERS else len(text.split())
    return ArmResult(f"r{i}", "candidate", "s", ok=True, e2e_s=0.5 + i / 20, ttft_s=0.1,
                     itl_s=(0.05,) * 3, output_text=text, output_tokens=count,
                     finish_reason="stop", tokens_from=tokens_from, quirks=("no_usage",))


def figures_of(results: list[ArmResult], **config) -> dict[tuple[str, str], object]:
    figs = compute_figures(results, config=MetricsConfig(n_resamples=50, min_samples=2,
                                                         **config))
    return {(f.name, f.arm): f for f in figs if f.scenario == "all"}


def test_a_foreign_arm_counted_in_characters_gets_no_figure_per_token() -> None:
    figs = figures_of([ours(i) for i in range(10)] + [foreign(i) for i in range(10)])
    characters = "arm 'candidate' sent no token counts (no usage, no logprobs) and no " \
                 "tokenizer was named (--tokenizer): its output was counted in characters"
    for name in ("rer", "rer_decode", "latency_ratio", "termination_accuracy", "tpot_p50"):
        f = figs[(name, "candidate")]
        assert f.status == "not_computable" and f.value is None and f.reason == characters
    no_extension = "arm 'candidate' returned no `layergate` extension"
    for name in ("rer_theoretical", "rer_realisation", "token_efficiency"):
        assert figs[(name, "candidate")].reason.startswith(no_extension), name
    assert figs[("token_kl", "candidate")].reason.startswith("arm 'baseline' returned no "
                                                             "top_logprobs")
    # what needs no token count is computed from what the arm returned
    assert figs[("exact_match", "candidate")].value == pytest.approx(0.6)
    assert figs[("e2e_p50", "candidate")].value is not None
    assert figs[("itl_p50", "candidate")].value == pytest.approx(0.05)
    unit = figs[("first_divergence", "candidate")].detail["unit"]
    assert unit.startswith("whitespace words")
    # the baseline is our engine: all its own figures are there
    assert figs[("token_efficiency", "baseline")].status != "not_computable"
    # every figure is either a value or a reason
    for f in figs.values():
        assert (f.value is None) == (f.status == "not_computable") and (f.value is not None
                                                                         or f.reason)
        assert f.name in FIGURES


def test_counts_from_a_tokenizer_give_the_figures_per_token(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(sorted({w for t in TEXTS for w in t.split()}
                                               | {"indeed", "[UNK]"}))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    results = [ours(i) for i in range(10)] + [foreign(i, TOKENIZER) for i in range(10)]
    figs = figures_of(results, tokenizer=str(tmp_path))
    rer = figs[("rer", "candidate")]
    assert rer.status == "ok" and rer.value > 0.4  # half the time, about the same tokens
    # one more token ("indeed") is within the 2-token tolerance: every ending is correct
    assert figs[("termination_accuracy", "candidate")].value == 1.0
    # without token ids from the candidate, both texts are cut by the tokenizer: identical
    # answers count their whole length, the "indeed" ones diverge at their end
    fd = figs[("first_divergence", "candidate")]
    assert fd.detail["unit"] == f"tokens of {tmp_path / 'tokenizer.json'}"
    assert fd.value == pytest.approx(sum(len(TEXTS[i % 5].split()) for i in range(10)) / 10)


def test_what_each_arm_carried_is_counted() -> None:
    failed = ArmResult("r9", "candidate", "s", ok=False, error="error in stream: x",
                       quirks=("error_in_stream",))
    summary = answer_summary([ours(0), ours(1), foreign(0), foreign(1, TOKENIZER), failed])
    assert summary == {
        "baseline": {"tokens_from": {USAGE: 2}, "quirks": {}},
        "candidate": {"tokens_from": {CHARACTERS: 1, TOKENIZER: 1},
                      "quirks": {"error_in_stream": 1, "no_usage": 2}}}
    assert describe(summary["candidate"]["quirks"]) == "error_in_stream ×1, no_usage ×2"


def record(body: dict) -> TrafficRecord:
    return TrafficRecord("r1", 0.0, "s", "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hi"}], **body})


@pytest.mark.parametrize(("body", "marked"), [
    ({"seed": 7, "temperature": 0.8}, True),
    ({"seed": 7}, True),  # the server's default temperature samples
    ({"seed": 7, "temperature": 0}, False),  # greedy: the seed does not matter
    ({"temperature": 0.8}, False),  # no seed asked for
])
def test_a_seeded_sampled_repeat_that_differs_is_marked(body: dict, marked: bool) -> None:
    first = ArmResult("r1", "candidate", "s", ok=True, output_text="a b", repeat=0)
    again = dataclasses.replace(first, output_text="a c", repeat=1)
    same = dataclasses.replace(first, repeat=2)
    assert (SEED_IGNORED in mark_seed_ignored(again, first, record(body)).quirks) == marked
    assert mark_seed_ignored(same, first, record(body)).quirks == ()
    assert mark_seed_ignored(first, first, record(body)).quirks == ()
