"""Hypothesis properties of the figures: identical arms, breakdowns that add up,
reproducible bootstrap, independence from record order."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layergate.exporters.figures.bootstrap import resample_sums
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.records import ArmResult

CFG = MetricsConfig(n_resamples=100, min_samples=2)
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

answer = st.tuples(
    st.sampled_from(["short", "long"]),
    st.floats(0.05, 5.0), st.floats(0.01, 0.5),
    st.integers(1, 16), st.sampled_from(["stop", "length"]),
    st.lists(st.integers(0, 50), min_size=1, max_size=6),
)


def _rows(rid: str, arm: str, a: tuple, scenario: str | None = None) -> ArmResult:
    scen, e2e, ttft, tokens, finish, ids = a
    return ArmResult(request_id=rid, arm=arm, scenario=scenario or scen, ok=True, e2e_s=e2e,
                     ttft_s=min(ttft, e2e), output_tokens=tokens, finish_reason=finish,
                     token_ids=tuple(ids), output_text=" ".join(f"w{i}" for i in ids))


def _by_key(figures):
    return {(f.name, f.arm, f.scenario): f for f in figures}


@SETTINGS
@given(st.lists(answer, min_size=3, max_size=25))
def test_identical_arms(answers) -> None:
    res = []
    for i, a in enumerate(answers):
        res += [_rows(str(i), "baseline", a), _rows(str(i), "candidate", a)]
    figs = _by_key(compute_figures(res, config=CFG))
    rer = figs[("rer", "candidate", "all")]
    assert abs(rer.value) < 1e-9 and rer.ci_low <= 1e-6 and rer.ci_high >= -1e-6
    assert figs[("exact_match", "candidate", "all")].value == 1.0
    assert figs[("termination_accuracy", "candidate", "all")].value == 1.0
    assert abs(figs[("latency_ratio", "candidate", "all")].value - 1) < 1e-9
    # sacreBLEU's corpus BLEU is 100 for identical texts, except that a corpus without a
    # single 4-gram scores 0 (its 4-gram precision is undefined); chrF is 100 either way
    four_grams = any(len(ids) >= 4 for *_, ids in answers)
    assert abs(figs[("bleu", "candidate", "all")].value - (100 if four_grams else 0)) < 1e-9
    assert abs(figs[("chrf", "candidate", "all")].value - 100) < 1e-9


@SETTINGS
@given(st.lists(st.tuples(answer, answer), min_size=1, max_size=25), st.integers(0, 5))
def test_termination_breakdown_sums_to_total(pairs, tolerance) -> None:
    res = []
    for i, (a, b) in enumerate(pairs):
        res += [_rows(str(i), "baseline", a), _rows(str(i), "candidate", b, scenario=a[0])]
    cfg = MetricsConfig(n_resamples=20, min_samples=1, termination_tolerance=tolerance)
    figs = compute_figures(res, config=cfg)
    for scenario in {f.scenario for f in figs}:
        kinds = [f for f in figs if f.scenario == scenario and f.arm == "candidate"
                 and f.name.startswith("termination_")]
        assert len(kinds) == 4
        assert abs(sum(f.value for f in kinds) - 1) < 1e-9


@SETTINGS
@given(st.lists(st.tuples(answer, answer), min_size=2, max_size=20), st.integers(0, 2**31))
def test_figures_invariant_to_record_order_and_reproducible(pairs, seed) -> None:
    res = []
    for i, (a, b) in enumerate(pairs):
        res += [_rows(f"r{i}", "baseline", a), _rows(f"r{i}", "candidate", b, scenario=a[0])]
    cfg = MetricsConfig(n_resamples=50, seed=seed, min_samples=2)
    first = compute_figures(res, config=cfg)
    shuffled = res[:]
    random.Random(seed).shuffle(shuffled)
    assert compute_figures(shuffled, config=cfg) == first


@SETTINGS
@given(st.integers(0, 2**31), st.lists(st.integers(0, 2), min_size=1, max_size=40))
def test_bootstrap_reproducible_with_a_seed(seed, strata) -> None:
    strata = np.sort(np.array(strata))
    cols = {"x": np.arange(len(strata), dtype=float), "y": np.ones(len(strata))}
    a = resample_sums(cols, strata, 3, 30, seed)
    b = resample_sums(cols, strata, 3, 30, seed)
    assert np.array_equal(a.boot, b.boot) and np.array_equal(a.point, b.point)
    # stratified: each resample keeps every stratum's size
    for s in range(3):
        assert np.all(a.boot[s, :, 1] == (strata == s).sum())
