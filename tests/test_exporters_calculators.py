"""Hand-computed small cases for every calculator (no model, no servers)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from layergate.exporters.figures import Figure
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.recorded import recorded_result
from layergate.exporters.figures.stats import quantiles_ci, wilcoxon
from layergate.exporters.figures.token_kl import position_kl
from layergate.exporters.prom_text import cache_counters
from layergate.exporters.records import ArmResult, MetricsScrape

CFG = MetricsConfig(n_resamples=200, min_samples=2, min_determinism_prompts=1)


def r(rid: str, arm: str, *, scenario: str = "s", ok: bool = True, e2e: float = 1.0,
      ttft: float | None = 0.1, tokens: int = 10, finish: str = "stop", text: str = "a b c",
      ids: tuple[int, ...] | None = None, ext: dict | None = None, repeat: int = 0,
      concurrency: int = 1, itl: tuple[float, ...] = (), top=None, prompt: int = 0
      ) -> ArmResult:
    return ArmResult(request_id=rid, arm=arm, scenario=scenario, ok=ok, e2e_s=e2e, ttft_s=ttft,
                     output_tokens=tokens, finish_reason=finish, output_text=text,
                     token_ids=ids, extension=ext or {}, repeat=repeat,
                     concurrency=concurrency, itl_s=itl, top_logprobs=top,
                     prompt_tokens=prompt)


def get(figures: list[Figure], name: str, arm: str = "candidate", scenario: str = "all"
        ) -> Figure:
    return next(f for f in figures if (f.name, f.arm, f.scenario) == (name, arm, scenario))


def test_rer_is_one_minus_the_ratio_of_time_per_token() -> None:
    # A: (2 + 4) s / (10 + 20) tokens = 0.2 s/token; B: (1 + 2) / (10 + 20) = 0.1 -> RER 0.5
    res = [r("1", "baseline", e2e=2, tokens=10), r("2", "baseline", e2e=4, tokens=20),
           r("1", "candidate", e2e=1, tokens=10, ext={"theoretical_saving": 0.8}),
           r("2", "candidate", e2e=2, tokens=20, ext={"theoretical_saving": 0.5}),
           # a failed candidate request is not paired: left out of every sum
           r("3", "baseline", e2e=9, tokens=1), r("3", "candidate", ok=False, e2e=None)]
    figs = compute_figures(res, config=CFG)
    rer = get(figs, "rer")
    assert rer.value == pytest.approx(0.5) and rer.n == 2 and rer.status == "ok"
    assert rer.ci_low <= 0.5 <= rer.ci_high
    # decode only: A (1.9 + 3.9) / (9 + 19), B (0.9 + 1.9) / 28
    assert get(figs, "rer_decode").value == pytest.approx(1 - 2.8 / 5.8)
    # token-weighted theoretical saving: (0.8 * 10 + 0.5 * 20) / 30 = 0.6
    assert get(figs, "rer_theoretical").value == pytest.approx(0.6)
    assert get(figs, "rer_realisation").value == pytest.approx(0.5 / 0.6)
    rrr = get(figs, "rrr")
    assert rrr.value == pytest.approx((0.5 - 0.2) / 0.2) and rrr.detail["stage_point"] == "full"


def test_realisation_is_not_computable_when_nothing_was_skipped() -> None:
    res = [r(str(i), arm, ext={"theoretical_saving": 0.0}) for i in range(3)
           for arm in ("baseline", "candidate")]
    f = get(compute_figures(res, config=CFG), "rer_realisation")
    assert f.value is None and f.status == "not_computable" and "theoretical" in f.reason


def test_termination_breakdown_by_kind() -> None:
    # oracle (baseline) vs candidate, tolerance 2 tokens
    cases = [("length", 16, "length", 16, "correct"),
             ("stop", 10, "stop", 12, "correct"),      # within tolerance
             ("stop", 10, "length", 16, "truncated"),
             ("stop", 10, "stop", 7, "premature"),
             ("length", 16, "stop", 5, "premature"),
             ("stop", 10, "stop", 13, "overrun"),
             ("length", 16, "stop", 15, "correct")]
    res = []
    for i, (fa, ta, fb, tb, _) in enumerate(cases):
        res += [r(str(i), "baseline", finish=fa, tokens=ta),
                r(str(i), "candidate", finish=fb, tokens=tb)]
    figs = compute_figures(res, config=CFG)
    expect = {"termination_accuracy": 3, "termination_truncated": 1,
              "termination_premature": 2, "termination_overrun": 1}
    for name, count in expect.items():
        assert get(figs, name).value == pytest.approx(count / 7), name
    assert sum(get(figs, n).value for n in expect) == pytest.approx(1.0)


def _recording(rid: str, scenario: str, finish: str, tokens: int) -> ArmResult:
    return recorded_result(rid, scenario, {"choices": [{"finish_reason": finish,
                                                        "message": {"content": "x"}}],
                                           "usage": {"completion_tokens": tokens}})


def test_termination_oracle_is_the_baseline_and_the_recording_has_its_own_figure() -> None:
    # (id, scenario, recorded, baseline, candidate): (finish, tokens); baseline2 = baseline;
    # None: no recording / the candidate failed. Tolerance 2 tokens.
    cases = [("1", "a", ("length", 16), ("stop", 4), ("stop", 4)),
             ("2", "a", ("stop", 10), ("stop", 10), ("stop", 11)),
             ("3", "a", ("stop", 10), ("stop", 20), ("stop", 20)),
             ("4", "b", None, ("stop", 8), ("stop", 3)),
             ("5", "b", ("stop", 10), ("stop", 10), None)]
    res = []
    for rid, scenario, rec, base, cand in cases:
        res += [r(rid, arm, scenario=scenario, finish=base[0], tokens=base[1])
                for arm in ("baseline", "baseline2")]
        res.append(r(rid, "candidate", scenario=scenario, finish=cand[0], tokens=cand[1])
                   if cand else r(rid, "candidate", scenario=scenario, ok=False))
        res += [_recording(rid, scenario, *rec)] if rec else []
    figs = compute_figures(res, config=CFG)
    # against the baseline: 1-3 correct, 4 premature (3 < 8 - 2), 5 failed on the candidate
    ta = get(figs, "termination_accuracy")
    assert ta.value == pytest.approx(3 / 4) and ta.n == 4 and ta.noise_floor == 1.0
    assert ta.detail["oracle"] == "baseline" and ta.detail["tolerance_tokens"] == 2
    assert get(figs, "termination_premature").value == pytest.approx(1 / 4)
    assert get(figs, "termination_overrun").value == 0.0
    assert get(figs, "termination_accuracy", "baseline2").value == 1.0
    # against the recording (1, 2, 3, 5): 1 premature (4 < 16 - 2), 2 correct (11 within
    # 10 + 2), 3 overrun (20 > 10 + 2), 5 correct where the arm answered it
    recorded = {arm: get(figs, "termination_accuracy_recorded", arm)
                for arm in ("baseline", "baseline2", "candidate")}
    assert recorded["baseline"].value == pytest.approx(2 / 4) and recorded["baseline"].n == 4
    assert recorded["baseline2"].value == pytest.approx(2 / 4) and recorded["baseline2"].n == 4
    cand = recorded["candidate"]
    assert cand.value == pytest.approx(1 / 3) and cand.n == 3
    assert cand.noise_floor == pytest.approx(2 / 4)  # the baseline's own agreement
    assert cand.detail["recorded_requests"] == 4 and cand.detail["tolerance_tokens"] == 2
    assert recorded["baseline"].noise_floor is None
    a = get(figs, "termination_accuracy_recorded", scenario="a")
    assert a.value == pytest.approx(1 / 3) and a.n == 3 and a.detail["recorded_requests"] == 3
    b = get(figs, "termination_accuracy_recorded", scenario="b")
    assert b.value is None and b.status == "not_computable" and b.n == 0
    assert get(figs, "termination_accuracy_recorded", "baseline", "b").value == 1.0


def test_no_recording_no_recorded_termination_figure() -> None:
    res = [r(str(i), arm) for i in range(3) for arm in ("baseline", "candidate")]
    figs = compute_figures(res, config=CFG)
    assert get(figs, "termination_accuracy").value == 1.0
    assert not [f for f in figs if f.name == "termination_accuracy_recorded"]


def test_malformed_recording_names_what_is_missing() -> None:
    with pytest.raises(ValueError, match="usage.completion_tokens"):
        recorded_result("2", "s", {"choices": [{"finish_reason": "stop"}]})


def _scrape(arm: str, when: str, hits: float, queries: float, vllm: bool = False) -> MetricsScrape:
    if vllm:
        text = ("# TYPE vllm:prefix_cache_hits counter\n"
                f'vllm:prefix_cache_hits_total{{model_name="m"}} {hits}\n'
                "# TYPE vllm:prefix_cache_queries counter\n"
                f'vllm:prefix_cache_queries_total{{model_name="m"}} {queries}\n')
    else:
        text = ("# TYPE layergate_prefix_cache_hits_total counter\n"
                f'layergate_prefix_cache_hits_total{{policy="full"}} {hits}\n'
                f'layergate_prefix_cache_hits_total{{policy="dynamic"}} 1\n'
                "# TYPE layergate_prefix_cache_queries_total counter\n"
                f'layergate_prefix_cache_queries_total{{policy="full"}} {queries}\n'
                f'layergate_prefix_cache_queries_total{{policy="dynamic"}} 1\n')
    return MetricsScrape(arm, when, text)


def test_cache_hit_delta_from_scrapes_reference_engine_and_vllm() -> None:
    res = [r(str(i), arm) for i in range(3) for arm in ("baseline", "baseline2", "candidate")]
    scrapes = [_scrape("baseline", "before", 10, 100), _scrape("baseline", "after", 60, 200),
               _scrape("candidate", "before", 0, 0), _scrape("candidate", "after", 25, 100),
               _scrape("baseline2", "before", 0, 0, vllm=True),
               _scrape("baseline2", "after", 40, 80, vllm=True)]
    figs = compute_figures(res, scrapes, config=CFG)
    # h_A = 50 / 100 = 0.5, h_B = 25 / 100 = 0.25 -> 0.5; h_A' (vLLM) = 0.5 -> 0
    chd = get(figs, "cache_hit_delta")
    assert chd.value == pytest.approx(0.5) and chd.noise_floor == pytest.approx(0.0)
    assert get(figs, "cache_hit_delta", arm="baseline2").value == pytest.approx(0.0)
    assert cache_counters(scrapes[4].text).source == "vllm:prefix_cache_hits_total"


def test_cache_hit_delta_not_computable_never_zero_or_nan() -> None:
    res = [r(str(i), arm) for i in range(3) for arm in ("baseline", "candidate")]
    zero = [_scrape("baseline", "before", 5, 100), _scrape("baseline", "after", 5, 200),
            _scrape("candidate", "before", 0, 0), _scrape("candidate", "after", 25, 100)]
    f = get(compute_figures(res, zero, config=CFG), "cache_hit_delta")
    assert f.value is None and f.status == "not_computable" and "hit rate is 0" in f.reason
    absent = [MetricsScrape(a, w, "# TYPE x counter\nx_total 1\n")
              for a in ("baseline", "candidate") for w in ("before", "after")]
    f = get(compute_figures(res, absent, config=CFG), "cache_hit_delta")
    assert f.value is None and "no prefix-cache counters" in f.reason
    f = get(compute_figures(res, [], config=CFG), "cache_hit_delta")
    assert f.value is None and "scrape" in f.reason


def test_consistency_exact_match_prefix_and_kl() -> None:
    res = [r("1", "baseline", ids=(1, 2, 3, 4), text="w x y z"),
           r("1", "candidate", ids=(1, 2, 9, 4), text="w x q z"),
           r("2", "baseline", ids=(5, 6), text="u v"), r("2", "candidate", ids=(5, 6), text="u v"),
           # no token ids on one side: the text decides, prefix in words
           r("3", "baseline", text="one two three"), r("3", "candidate", text="one two four")]
    figs = compute_figures(res, config=CFG)
    assert get(figs, "exact_match").value == pytest.approx(1 / 3)
    assert get(figs, "first_divergence").value == pytest.approx((2 + 2 + 2) / 3)
    assert get(figs, "token_kl").status == "not_computable"
    # KL over A's top tokens, renormalised: p_A = (0.5, 0.5), p_B = (0.25, 0.75) after norm
    a = {"x": math.log(0.5), "y": math.log(0.5)}
    b = {"x": math.log(0.2), "y": math.log(0.6)}
    expect = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert position_kl(a, b) == pytest.approx(expect)
    assert position_kl(a, a) == pytest.approx(0.0)


def test_consistency_noise_floor_and_excess() -> None:
    res = []
    for i in range(4):
        res += [r(str(i), "baseline", ids=(1, 2)), r(str(i), "baseline2", ids=(1, 2)),
                r(str(i), "candidate", ids=(1, 2) if i < 2 else (1, 3))]
    f = get(compute_figures(res, config=CFG), "exact_match")
    assert (f.value, f.noise_floor, f.detail["excess"]) == (0.5, 1.0, -0.5)
    low, high = f.detail["excess_ci"]
    assert low <= -0.5 <= high <= 0


def test_latency_percentiles_goodput_efficiency_errors() -> None:
    e2e = [0.5, 1.0, 1.5, 2.0, 10.0]
    res = [r(str(i), "baseline", e2e=v, ttft=0.1 if i < 4 else 3.0, tokens=11,
             itl=(0.01, 0.02), prompt=10,
             ext={"computed_tokens": 20, "prefix_cache_hit_tokens": 4})
           for i, v in enumerate(e2e)]
    res.append(r("x", "baseline", ok=False, e2e=None))
    figs = compute_figures(res, config=CFG)
    assert get(figs, "e2e_p50", "baseline").value == pytest.approx(np.quantile(e2e, 0.5))
    assert get(figs, "e2e_p99", "baseline").value == pytest.approx(np.quantile(e2e, 0.99))
    assert get(figs, "e2e_jitter", "baseline").value == pytest.approx(
        np.quantile(e2e, 0.99) - np.quantile(e2e, 0.5))
    assert get(figs, "itl_p50", "baseline").value == pytest.approx(0.015)
    # TPOT = (E2E - TTFT) / 10: 0.04, 0.09, 0.14, 0.19, 0.7 -> the last misses 0.5 s and TTFT 2 s
    assert get(figs, "tpot_p50", "baseline").value == pytest.approx(0.14)
    assert get(figs, "goodput", "baseline").value == pytest.approx(4 / 6)
    assert get(figs, "error_rate", "baseline").value == pytest.approx(1 / 6)
    # useful positions: (10 prompt - 4 cached) + (11 output - 1) = 16 of 20 computed
    assert get(figs, "token_efficiency", "baseline").value == pytest.approx(0.8)


def test_latency_ratio_with_paired_wilcoxon() -> None:
    rng = np.random.default_rng(3)
    a = rng.uniform(1, 2, 30)
    b = a * rng.uniform(0.6, 0.9, 30)
    res = [r(str(i), "baseline", e2e=a[i], tokens=10) for i in range(30)]
    res += [r(str(i), "candidate", e2e=b[i], tokens=10) for i in range(30)]
    f = get(compute_figures(res, config=CFG), "latency_ratio")
    assert f.value == pytest.approx(np.exp(np.mean(np.log(b / a))))
    ref = scipy.stats.wilcoxon(np.log(b / a))
    assert f.detail["p_value"] == pytest.approx(ref.pvalue)
    assert f.detail["effect_size"] == pytest.approx(-1.0)  # every pair got faster


def test_wilcoxon_matches_scipy_exact_and_normal() -> None:
    rng = np.random.default_rng(0)
    for n in (6, 30, 50, 80, 400):
        d = rng.normal(0.1, 1, n)
        ref = scipy.stats.wilcoxon(d)
        got = wilcoxon(d)
        assert got.statistic == ref.statistic and got.p_value == pytest.approx(ref.pvalue)
    tied = np.round(rng.normal(0.2, 1, 60), 1)
    assert wilcoxon(tied).p_value == pytest.approx(scipy.stats.wilcoxon(tied).pvalue)
    assert wilcoxon(np.zeros(5)) is None


def test_quantile_ci_brackets_the_quantile() -> None:
    x = np.random.default_rng(1).exponential(1.0, 2000)
    for (point, low, high), q in zip(quantiles_ci(x, (0.5, 0.9, 0.99), 0.95), (0.5, 0.9, 0.99),
                                     strict=True):
        assert point == pytest.approx(np.quantile(x, q)) and low < point < high


def test_determinism_output_resource_latency() -> None:
    res = []
    for rep in range(3):
        # prompt p1 repeats identically; p2 differs on the last repeat at concurrency 4
        res.append(r("p1", "candidate", repeat=rep, ids=(1, 2), e2e=1.0 + rep,
                     ext={"peak_memory_bytes": 100 + 10 * rep}))
        res.append(r("p2", "candidate", repeat=rep, concurrency=4, e2e=2.0,
                     ids=(1, 2) if rep < 2 else (1, 3), ext={"peak_memory_bytes": 100}))
    figs = compute_figures([], determinism=res, config=CFG)
    out = get(figs, "output_determinism")
    assert out.value == 0.5 and out.detail["by_concurrency"] == {"1": 1.0, "4": 0.0}
    # std of (100, 110, 120) = 8.165, of (100, 100, 100) = 0 -> mean 4.08
    assert get(figs, "resource_determinism").value == pytest.approx(np.std([100, 110, 120]) / 2)
    e2e = [1.0, 2.0, 3.0, 2.0, 2.0, 2.0]
    assert get(figs, "latency_determinism").value == pytest.approx(
        np.quantile(e2e, 0.99) / np.quantile(e2e, 0.5))


def test_minimum_samples_make_figures_insufficient() -> None:
    res = [r(str(i), arm) for i in range(5) for arm in ("baseline", "candidate")]
    figs = compute_figures(res, config=MetricsConfig(n_resamples=50, min_samples=20))
    f = get(figs, "rer")
    assert f.status == "insufficient" and "5 samples" in f.reason and f.value is not None


def test_every_figure_overall_and_per_scenario() -> None:
    res = [r(f"{s}{i}", arm, scenario=s) for s in ("short", "long") for i in range(3)
           for arm in ("baseline", "baseline2", "candidate")]
    figs = compute_figures(res, config=CFG)
    for name in ("rer", "termination_accuracy", "exact_match", "bleu", "e2e_p50", "goodput",
                 "latency_ratio", "cache_hit_delta"):
        assert {f.scenario for f in figs if f.name == name} == {"all", "short", "long"}, name


def test_duplicate_rows_are_an_error() -> None:
    with pytest.raises(ValueError, match="duplicate result for request '1' on arm 'baseline'"):
        compute_figures([r("1", "baseline"), r("1", "baseline")], config=CFG)


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="confidence"):
        MetricsConfig(confidence=1.5)


def test_determinism_run_given_as_results() -> None:
    # a determinism run directory read directly: repeats at two concurrency levels
    res = [r("p", "candidate", repeat=rep, concurrency=c, ids=(1,)) for rep in range(2)
           for c in (1, 2)]
    figs = compute_figures(res, config=CFG)
    assert get(figs, "output_determinism").value == 1.0
    assert not [f for f in figs if f.name == "rer"]


def test_token_kl_over_positions_with_the_same_context() -> None:
    half = {"a": math.log(0.5), "b": math.log(0.5)}
    skew = {"a": math.log(0.2), "b": math.log(0.6)}
    far = {"c": math.log(0.9)}
    # same first token, then divergence at position 1: positions 0 and 1 count, not 2
    res = [r("1", "baseline", ids=(1, 2, 3), top=(half, half, half)),
           r("1", "candidate", ids=(1, 5, 3), top=(half, skew, far))]
    f = get(compute_figures(res, config=CFG), "token_kl")
    kl_skew = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert f.value == pytest.approx(kl_skew / 2) and f.n == 2 and f.unit == "nats"


def _aa_run(n: int, a2_scale: float, rng: np.random.Generator) -> list[ArmResult]:
    """Identical arms with per-request noise; baseline2's process `a2_scale` slower."""
    res = []
    for i in range(n):
        base = rng.uniform(1, 2)
        for arm, scale in (("baseline", 1.0), ("baseline2", a2_scale), ("candidate", 1.0)):
            e2e = base * scale * rng.uniform(0.98, 1.02)
            res.append(r(str(i), arm, e2e=e2e, ttft=0.1 * e2e, tokens=10))
    return res


def test_timing_intervals_carry_the_between_process_term() -> None:
    """RER and the latency ratios widen by the process spread (prior, pooled with what A'
    shows); the per-request bootstrap alone is process_spread 0."""
    res = _aa_run(60, 1.0, np.random.default_rng(5))
    bare = compute_figures(res, config=MetricsConfig(n_resamples=400, process_spread=0.0))
    wide = compute_figures(res, config=MetricsConfig(n_resamples=400, process_spread=0.02))
    for name in ("rer", "rer_decode", "latency_ratio", "ttft_latency_ratio",
                 "tpot_latency_ratio"):
        b, w = get(bare, name), get(wide, name)
        assert b.value == pytest.approx(w.value)
        assert "process_spread" not in b.detail
        # two processes, each N(0, 0.02^2) in log speed: +-1.96 * 0.02 * sqrt(2) ~ 0.055
        assert (w.ci_high - w.ci_low) - (b.ci_high - b.ci_low) > 0.04, name
        assert w.ci_low < w.value < w.ci_high
        assert w.detail["process_spread"] == pytest.approx(0.02)  # A' agrees: the prior
    assert get(wide, "latency_ratio").detail["excess_ci"][0] < -0.03
    # an A' process 10 % slower than A: the run's own evidence pulls the spread up
    slow = compute_figures(_aa_run(60, 1.10, np.random.default_rng(5)),
                           config=MetricsConfig(n_resamples=400, process_spread=0.02))
    rer = get(slow, "rer")
    assert rer.detail["process_spread"] > 0.03 and rer.ci_low < -0.05 and rer.ci_high > 0.05


def test_latency_ratio_excess_without_baseline2_is_against_no_difference() -> None:
    res = [x for x in _aa_run(30, 1.0, np.random.default_rng(1)) if x.arm != "baseline2"]
    f = get(compute_figures(res, config=CFG), "latency_ratio")
    assert f.detail["excess"] == pytest.approx(f.value - 1)
    assert f.detail["excess_ci"] == pytest.approx([f.ci_low - 1, f.ci_high - 1])
    assert "no baseline2" in f.detail["excess_floor"]
