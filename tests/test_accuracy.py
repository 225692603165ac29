"""Accuracy against references (exporters/figures/accuracy.py): McNemar's exact test
against scipy's binomial test, the paired bootstrap interval of the delta, the figures of
a small run directory written through the real store (and none without references), and
an accuracy_delta rule judged end to end by the gate."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from scipy.stats import binomtest

from layergate.exporters.catalogue import ACCURACY_FIGURES
from layergate.exporters.figures.accuracy import mcnemar_exact, read_references
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.sequential.figures import figure_path
from layergate.exporters.prometheus_export import register_run
from layergate.exporters.records import ArmResult
from layergate.exporters.references import parse_reference
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.gate.fixed.evaluation import evaluate
from layergate.harness.gate.policy import load_policy
from layergate.harness.gate.sequential.decision import decide
from layergate.harness.manifest import Manifest, now_iso
from layergate.harness.report.html import render_html
from layergate.harness.rundir import RunDir

CFG = MetricsConfig(n_resamples=400, min_samples=5)
ARMS = ("baseline", "baseline2", "candidate")


@pytest.mark.parametrize("b, c", [(0, 0), (0, 1), (1, 0), (3, 3), (2, 9), (15, 4),
                                  (0, 25), (60, 40), (250, 301)])
def test_mcnemar_exact_is_scipys_binomial_test_on_the_discordant_pairs(b: int, c: int) -> None:
    expected = 1.0 if b + c == 0 else binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def _answer(rid: str, arm: str, scenario: str, right: bool, ok: bool = True) -> ArmResult:
    return ArmResult(request_id=rid, arm=arm, scenario=scenario, ok=ok, ttft_s=0.1,
                     e2e_s=0.5, itl_s=(0.1, 0.1, 0.1), output_text=" yes " if right else "no",
                     output_tokens=4, finish_reason="stop", max_tokens=8)


def _correct(n: int, seed: int, lost: float = 0.0) -> dict[str, np.ndarray]:
    """Correlated correctness: A and A' the same model (right on 70 %, a few flips each);
    the candidate A's answers with `lost` of the items made wrong."""
    rng = np.random.default_rng(seed)
    base = rng.random(n) < 0.7
    out = {arm: base ^ (rng.random(n) < 0.05) for arm in ("baseline", "baseline2")}
    out["candidate"] = out["baseline"] & ~(np.arange(n) < round(lost * n))
    return out


def _results(right: dict[str, np.ndarray]) -> list[ArmResult]:
    return [_answer(f"r{i:03d}", arm, ("short", "long")[i % 2], bool(right[arm][i]))
            for arm in ARMS for i in range(len(right[arm]))]


def _refs(n: int) -> dict:
    return {f"r{i:03d}": parse_reference({"kind": "exact", "answers": ["yes"]})
            for i in range(n)}


def test_the_figures_count_what_they_say() -> None:
    right = _correct(80, seed=3, lost=0.25)
    right["candidate"][np.flatnonzero(~right["baseline"])[:2]] = True  # two got right
    figures = compute_figures(_results(right), config=CFG, references=_refs(80))
    got = {(f.name, f.arm, f.scenario): f for f in figures if f.name in ACCURACY_FIGURES}
    a, b = right["baseline"], right["candidate"]
    rw, wr = int((a & ~b).sum()), int((~a & b).sum())
    assert got["accuracy", "baseline", "all"].value == pytest.approx(a.mean())
    assert got["accuracy", "candidate", "all"].value == pytest.approx(b.mean())
    delta = got["accuracy_delta", "candidate", "all"]
    assert delta.value == pytest.approx(b.mean() - a.mean())
    assert delta.ci_low < delta.value < delta.ci_high
    assert delta.noise_floor == pytest.approx(right["baseline2"].mean() - a.mean())
    assert delta.detail["excess"] == pytest.approx(delta.value - delta.noise_floor)
    assert got["right_to_wrong", "candidate", "all"].value == pytest.approx(rw / 80)
    assert got["wrong_to_right", "candidate", "all"].value == pytest.approx(wr / 80)
    p = got["accuracy_mcnemar_p", "candidate", "all"]
    assert p.value == pytest.approx(binomtest(rw, rw + wr, 0.5).pvalue)
    assert (p.detail["right_to_wrong"], p.detail["wrong_to_right"]) == (rw, wr)
    examples = got["right_to_wrong", "candidate", "all"].detail["examples"]
    assert len(examples) == 3 and all(a[int(x[1:])] and not b[int(x[1:])] for x in examples)
    # per scenario too, and the scenarios add up to the whole
    short = got["accuracy", "candidate", "short"]
    assert short.n == 40 and short.value == pytest.approx(b[::2].mean())


def test_a_failed_answer_and_a_request_without_reference_are_left_out() -> None:
    right = _correct(30, seed=1)
    results = _results(right)
    results[-1] = _answer(results[-1].request_id, "candidate", results[-1].scenario, True,
                          ok=False)
    refs = _refs(30)
    del refs["r000"]
    got = {(f.name, f.arm): f for f in compute_figures(results, config=CFG, references=refs)
           if f.scenario == "all"}
    assert got["accuracy", "baseline"].n == 29
    assert got["accuracy", "candidate"].n == 28
    assert got["accuracy_delta", "candidate"].n == 28


def test_without_references_there_are_no_accuracy_figures() -> None:
    figures = compute_figures(_results(_correct(30, seed=2)), config=CFG)
    assert not [f for f in figures if f.name in ACCURACY_FIGURES]


def test_the_paired_interval_is_narrower_than_the_unpaired_one() -> None:
    # correlated correctness: the pairing removes the shared item difficulty
    right = _correct(400, seed=5, lost=0.05)
    got = {(f.name, f.arm): f for f in compute_figures(
        _results(right), config=CFG, references=_refs(400)) if f.scenario == "all"}
    delta = got["accuracy_delta", "candidate"]
    width = delta.ci_high - delta.ci_low
    unpaired = sum(got["accuracy", arm].ci_high - got["accuracy", arm].ci_low
                   for arm in ("baseline", "candidate")) / 2 * np.sqrt(2)
    assert width < 0.6 * unpaired
    assert delta.ci_high < 0  # 5 % of new errors on 400 items: caught


def test_a_bad_reference_in_the_traffic_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "a", "reference": {"kind": "exact", "answers": ["x"]}}\n'
                    '{"id": "b", "reference": {"kind": "exact", "answers": []}}\n')
    with pytest.raises(ValueError, match=r"t.jsonl:2: reference.answers"):
        read_references(path)


def _write_run(path: Path, right: dict[str, np.ndarray], references: bool = True) -> Path:
    n = len(right["baseline"])
    run = RunDir(path)
    ref = {"kind": "exact", "answers": ["yes"]} if references else None
    run.write_traffic(TrafficRecord(f"r{i:03d}", i * 0.01, ("short", "long")[i % 2],
                                    "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": f"q{i}"}],
                                     "max_tokens": 8}, reference=ref) for i in range(n))
    with run.open_store() as store:
        store.put_many(_results(right), worker="test")
        counts = store.counts_by_arm()
    arms = dict.fromkeys(ARMS, "http://127.0.0.1:1")
    run.write_manifest(Manifest(id="acc", kind="replay", status="complete", created=now_iso(),
                                finished=now_iso(), config={"users": 1}, arms=arms,
                                traffic=run.traffic_summary(n, None), counts=counts))
    return path


POLICY = """
name: acc
min_samples: 20
max_error_rate: {default: 0.0}       # no error seen: 200 requests cannot show 1 %
metrics:
  accuracy_delta: {direction: ">=", threshold: -0.02}
scenarios:
  short:
    accuracy_delta: {direction: ">=", threshold: -0.5}
"""


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "acc.yaml"
    path.write_text(POLICY)
    return path


def test_an_accuracy_rule_gates_a_run_end_to_end(tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    same = _correct(200, seed=7)
    same["candidate"] = same["baseline"].copy()  # right exactly where A is
    assert evaluate(_write_run(tmp_path / "same", same), policy).verdict == "pass"
    worse = _correct(200, seed=7, lost=0.2)
    result = evaluate(_write_run(tmp_path / "worse", worse), policy)
    assert result.verdict == "fail"
    [check] = [c for c in result.checks if c.name == "accuracy_delta" and c.scenario == "all"]
    assert check.ci_high < -0.02
    # the per-scenario override is the short rows' rule (reported; gate_scenarios is off)
    [short] = [c for c in result.checks if c.name == "accuracy_delta" and c.scenario == "short"]
    assert short.status == "pass"


def test_a_run_without_references_is_inconclusive_on_an_accuracy_rule(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "plain", _correct(40, seed=1), references=False)
    result = evaluate(run, _policy(tmp_path))
    assert result.verdict == "inconclusive"
    assert not [f for f in result.figures if f.name in ACCURACY_FIGURES]


def test_the_sequential_gate_decides_accuracy_delta_anytime_valid(tmp_path: Path) -> None:
    # a CS is wider than a fixed interval: at 200 identical answers it is [-0.025, 0.025]
    path = tmp_path / "seq.yaml"
    path.write_text(POLICY.replace("-0.02", "-0.05"))
    policy = load_policy(path)
    same = _correct(200, seed=7)
    same["candidate"] = same["baseline"].copy()
    d = decide(_write_run(tmp_path / "same", same), policy)
    assert (d.verdict, d.decided) == ("pass", True), d.reasons
    worse = _correct(200, seed=7, lost=0.4)
    d = decide(_write_run(tmp_path / "worse", worse), policy)
    assert (d.verdict, d.decided) == ("fail", True), d.reasons
    assert d.n < 200  # stopped early, on the discordant pairs seen so far


def test_the_sequential_accuracy_delta_is_the_paired_mean_on_minus_one_to_one() -> None:
    right = _correct(120, seed=4, lost=0.1)
    cols = {"acc.candidate.pair": np.ones(120),
            "acc.candidate.rw": (right["baseline"] & ~right["candidate"]).astype(float),
            "acc.candidate.wr": (~right["baseline"] & right["candidate"]).astype(float)}
    path = figure_path("accuracy_delta", "candidate", cols, None, 20)  # type: ignore[arg-type]
    delta = right["candidate"].mean() - right["baseline"].mean()
    assert path.estimate[-1] == pytest.approx(delta)
    assert -1 <= path.low[-1] < delta < path.high[-1] <= 1
    assert path.look[19] and not path.look[18]


def test_the_html_report_shows_flipped_examples(tmp_path: Path) -> None:
    result = evaluate(_write_run(tmp_path / "worse", _correct(60, seed=3, lost=0.2)),
                      _policy(tmp_path))
    page = render_html(result)
    assert "Right on the baseline, wrong on the candidate" in page
    [fig] = [f for f in result.figures if f.name == "right_to_wrong"
             and f.arm == "candidate" and f.scenario == "all"]
    assert fig.detail["examples"] and all(f"<b>{i}</b>" in page for i in fig.detail["examples"])
    plain = evaluate(_write_run(tmp_path / "plain", _correct(30, seed=1), references=False),
                     _policy(tmp_path))
    assert "Accuracy against references" not in render_html(plain)


def test_the_accuracy_figures_are_exported_to_prometheus() -> None:
    figures = compute_figures(_results(_correct(40, seed=2, lost=0.1)), config=CFG,
                              references=_refs(40))
    registry = CollectorRegistry()
    register_run(registry, "r1", figures)
    text = generate_latest(registry).decode()
    for name in ("accuracy", "accuracy_delta", "right_to_wrong", "accuracy_mcnemar_p"):
        assert f'layergate_run_{name}{{arm="candidate",run="r1",scenario="all"}}' in text
    assert 'layergate_run_accuracy_delta_ci_low{arm="candidate"' in text


def test_the_bundled_lossy_policy_gates_on_accuracy_not_exact_match(tmp_path: Path) -> None:
    policy = load_policy("lossy")
    rules = {r.name: r for r in policy.rules}
    assert (rules["accuracy_delta"].threshold, rules["accuracy_delta"].critical) == (-0.02, True)
    assert not rules["exact_match"].critical
    # a candidate rewording nothing but losing 20 % of its right answers fails on accuracy
    result = evaluate(_write_run(tmp_path / "worse", _correct(200, seed=7, lost=0.2)), policy)
    [check] = [c for c in result.checks if c.name == "accuracy_delta" and c.scenario == "all"]
    assert check.status == "fail" and result.verdict == "fail"


def test_the_leaderboard_weighs_saving_against_accuracy(tmp_path: Path) -> None:
    from layergate.harness.gate.fixed.family import evaluate_family
    from layergate.harness.report import leaderboard
    from layergate.harness.report.family import render_family_markdown
    from layergate.harness.rundir import load_run

    n = 120
    right = _correct(n, seed=5)
    arms = {"baseline": right["baseline"], "baseline2": right["baseline2"],
            "good": right["baseline"].copy(),
            "bad": right["baseline"] & ~(np.arange(n) < 40)}
    run = RunDir(tmp_path / "run")
    run.write_traffic(TrafficRecord(f"r{i:03d}", i * 0.01, "short", "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": f"q{i}"}],
                                     "max_tokens": 8},
                                    reference={"kind": "exact", "answers": ["yes"]})
                      for i in range(n))
    with run.open_store() as store:
        store.put_many([_answer(f"r{i:03d}", arm, "short", bool(r[i]))
                        for arm, r in arms.items() for i in range(n)], worker="test")
        counts = store.counts_by_arm()
    run.write_manifest(Manifest(id="board", kind="replay", status="complete",
                                created=now_iso(), finished=now_iso(), config={"users": 1},
                                arms=dict.fromkeys(arms, "http://127.0.0.1:1"),
                                traffic=run.traffic_summary(n, None), counts=counts))
    family = evaluate_family(load_run(run.path), load_policy(_policy(tmp_path)))
    board = {r.name: r for r in leaderboard.rows(family)}
    assert leaderboard.columns(list(board.values()))[-2:] == ("accuracy", "accuracy_delta")
    assert board["good"].cells["accuracy_delta"].value == 0
    assert board["bad"].cells["accuracy_delta"].value == pytest.approx(
        -(right["baseline"][:40].sum()) / n)
    assert "| accuracy | accuracy_delta |" in render_family_markdown(family)
    # without references the leaderboard keeps its consistency columns only
    assert "accuracy" not in leaderboard.COLUMNS
