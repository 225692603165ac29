"""Cache-hit delta's confidence interval: the scrape value with the per-request bootstrap
around it, and the candidate's excess over the noise floor."""

from __future__ import annotations

import pytest

from layergate.exporters.figures import Figure
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.records import ArmResult, MetricsScrape

CFG = MetricsConfig(n_resamples=400, min_samples=2)


def row(rid: str, arm: str, hits: int, queries: int = 64) -> ArmResult:
    return ArmResult(request_id=rid, arm=arm, scenario="s", ok=True, e2e_s=1.0, ttft_s=0.1,
                     output_tokens=8, finish_reason="stop", output_text="x",
                     extension={"prefix_cache_hit_tokens": hits,
                                "prefix_cache_query_tokens": queries})


def scrapes(arm: str, hits: int, queries: int) -> list[MetricsScrape]:
    def text(h: int, q: int) -> str:
        return ("# TYPE layergate_prefix_cache_hits_total counter\n"
                f"layergate_prefix_cache_hits_total {h}\n"
                "# TYPE layergate_prefix_cache_queries_total counter\n"
                f"layergate_prefix_cache_queries_total {q}\n")
    return [MetricsScrape(arm, "before", text(0, 0)), MetricsScrape(arm, "after",
                                                                    text(hits, queries))]


def get(figures: list[Figure], arm: str = "candidate") -> Figure:
    return next(f for f in figures
                if (f.name, f.arm, f.scenario) == ("cache_hit_delta", arm, "all"))


def run(hits: dict[str, list[int]]) -> list[Figure]:
    results = [row(str(i), arm, h) for arm, hs in hits.items() for i, h in enumerate(hs)]
    scraped = [s for arm, hs in hits.items() for s in scrapes(arm, sum(hs), 64 * len(hs))]
    return compute_figures(results, scraped, config=CFG)


def test_identical_hits_give_a_zero_width_interval_at_zero() -> None:
    same = [32, 0, 16, 48, 0, 32] * 5
    f = get(run({"baseline": same, "baseline2": same, "candidate": same}))
    assert f.value == 0.0 and (f.ci_low, f.ci_high) == (0.0, 0.0)
    assert f.detail["excess"] == 0.0 and f.detail["excess_ci"] == [0.0, 0.0]
    assert f.detail["ci_source"].startswith("per-request")


def test_a_candidate_that_lost_its_hits_has_an_interval_wholly_above_the_threshold() -> None:
    base = [32, 16, 48, 32] * 8
    f = get(run({"baseline": base, "baseline2": base, "candidate": [h // 2 for h in base]}))
    assert f.value == pytest.approx(0.5)
    assert 0.05 < f.ci_low <= 0.5 <= f.ci_high
    assert f.detail["excess"] == pytest.approx(0.5) and f.detail["excess_ci"][0] > 0.05


def test_one_stray_miss_gives_an_interval_that_straddles_a_small_threshold() -> None:
    base = [32, 16, 48, 32] * 8
    cand = list(base)
    cand[3] = 0  # one request missed its 32-token prefix (arrival timing)
    f = get(run({"baseline": base, "baseline2": base, "candidate": cand}))
    assert f.value == pytest.approx(32 / sum(base))
    assert f.ci_low == pytest.approx(0.0) and f.ci_high >= f.value


def test_the_interval_contains_the_scrape_value_when_the_sources_disagree() -> None:
    base = [32, 16, 48, 32] * 8
    results = [row(str(i), arm, h) for arm in ("baseline", "candidate")
               for i, h in enumerate(base)]
    # the counters also saw traffic the replay did not send: h_B 20 % lower than per request
    scraped = scrapes("baseline", sum(base), 64 * len(base)) + scrapes(
        "candidate", int(sum(base) * 0.8), 64 * len(base))
    f = get(compute_figures(results, scraped, config=CFG))
    assert f.value == pytest.approx(0.2, abs=1e-3) and f.detail["from_answers"] == 0.0
    assert f.ci_low == 0.0 and f.ci_high == pytest.approx(f.value)


def test_without_the_extension_the_scrape_value_stands_alone() -> None:
    results = [ArmResult(request_id=str(i), arm=arm, scenario="s", ok=True, e2e_s=1.0,
                         ttft_s=0.1, output_tokens=8, finish_reason="stop", output_text="x")
               for arm in ("baseline", "candidate") for i in range(4)]
    scraped = scrapes("baseline", 40, 100) + scrapes("candidate", 30, 100)
    f = get(compute_figures(results, scraped, config=CFG))
    assert f.value == pytest.approx(0.25) and f.ci_low is None and f.ci_high is None
