"""`layergate judge`: the real SmolLM2 engine as the judge of a run's answers, every verdict
kept beside the results as it comes back, a rerun asking nothing twice, and the judge's own
noise counted on the outputs both baselines answered alike."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from layergate.exporters.catalogue import BASELINE, BASELINE2, CANDIDATE
from layergate.exporters.errors import UsageError
from layergate.exporters.judgements import FILE, append, digest, read_judgements
from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import COMPLETIONS, TrafficRecord
from layergate.harness.judge import (
    DEFAULT_PROMPT,
    Judge,
    JudgeError,
    check_template,
    judge_run,
    parse_verdict,
)

QUESTIONS = [("What is the capital of France?", "Paris"), ("What is 2 + 2?", "4")]


def _records() -> list[TrafficRecord]:
    judged = [TrafficRecord(f"q{i}", 0.0, "qa", COMPLETIONS, {"prompt": q, "max_tokens": 8},
                            reference={"kind": "judge", "answers": [a]})
              for i, (q, a) in enumerate(QUESTIONS)]
    return judged + [TrafficRecord("plain", 0.0, "qa", COMPLETIONS,
                                   {"prompt": "hi", "max_tokens": 8})]


def _results() -> list[ArmResult]:
    said = {BASELINE: ["Paris", "4"], BASELINE2: ["Paris", "5"], CANDIDATE: ["Lyon", "4"]}
    out = [ArmResult(f"q{i}", arm, "qa", True, output_text=text)
           for arm, texts in said.items() for i, text in enumerate(texts)]
    return out + [ArmResult("plain", BASELINE, "qa", True, output_text="hello"),
                  ArmResult("q0", CANDIDATE, "qa", False, error="timeout")]


@pytest.mark.model
def test_the_real_engine_judges_and_a_rerun_asks_nothing_twice(full_engine, tmp_path: Path):
    judge = Judge(full_engine.url, "smollm2-135m")
    summary = judge_run(tmp_path, _records(), _results(), dataclasses.replace(judge, concurrency=2))
    kept = read_judgements(tmp_path / FILE)
    # every answered output of a judged record, once; the failed one and `plain` not asked
    assert sorted((j.request_id, j.arm) for j in kept) == sorted(
        (f"q{i}", arm) for i in range(2) for arm in (BASELINE, BASELINE2, CANDIDATE))
    assert summary.judged == 6 and summary.kept == 0
    for j in kept:
        assert j.judge == "smollm2-135m" and j.prompt == digest(DEFAULT_PROMPT)
        assert j.verdict == parse_verdict(j.answer)  # the judge's own words, as it sent them
    # q0: both baselines said "Paris" (the judge's own noise is on such pairs); q1 differs
    assert (summary.pairs, summary.same_output) == (2, 1)
    again = judge_run(tmp_path, _records(), _results(), judge)
    assert (again.judged, again.kept) == (0, 6)
    assert len(read_judgements(tmp_path / FILE)) == 6


def test_a_new_output_or_template_is_judged_again(tmp_path: Path):
    from layergate.exporters.judgements import Judgement

    path = tmp_path / FILE
    for result in _results()[:6]:
        append(path, Judgement(result.request_id, result.arm, True, "CORRECT", "m",
                               digest(DEFAULT_PROMPT), digest(result.output_text)))
    changed = [r if (r.request_id, r.arm) != ("q1", CANDIDATE)
               else ArmResult("q1", CANDIDATE, "qa", True, output_text="four")
               for r in _results()]
    from layergate.harness.judge import to_judge

    done = {j.key for j in read_judgements(path)}
    assert [(a.result.request_id, a.result.arm)
            for a in to_judge(_records(), changed, done, digest(DEFAULT_PROMPT))] == [
        ("q1", CANDIDATE)]
    assert len(to_judge(_records(), changed, done, digest("other {output}"))) == 6


def test_verdicts_and_templates():
    assert parse_verdict("CORRECT.") is True and parse_verdict("wrong") is False
    assert parse_verdict("Incorrect, it is Paris") is False
    assert parse_verdict("I think so") is None
    assert check_template("Grade {output} for {question}", "x")
    with pytest.raises(UsageError, match="must use {output}"):
        check_template("Grade {answer}", "--prompt f")


def test_a_cut_last_line_is_left_out_and_a_bad_line_named(tmp_path: Path):
    path = tmp_path / FILE
    append(path, __import__("layergate.exporters.judgements", fromlist=["Judgement"]).Judgement(
        "q0", BASELINE, True, "CORRECT", "m", "p", "o"))
    with path.open("a") as f:
        f.write('{"request_id": "q1", "arm": "base')
    assert len(read_judgements(path)) == 1
    path.write_text('{"request_id": 1}\n' + json.dumps({"x": 1}) + "\n")
    with pytest.raises(ValueError, match=f"{FILE}:1"):
        read_judgements(path)


def test_an_unreachable_judge_is_named(tmp_path: Path):
    with pytest.raises(JudgeError, match="127.0.0.1:9"):
        judge_run(tmp_path, _records(), _results(), Judge("http://127.0.0.1:9", "m"))
    assert not (tmp_path / FILE).exists() or read_judgements(tmp_path / FILE) == []


def _judged_run(path: Path, n: int = 30) -> Path:
    """A complete run of `n` requests with judge references, every arm answering "a{i}"."""
    from layergate.exporters.catalogue import ARMS
    from layergate.harness.manifest import Manifest, now_iso
    from layergate.harness.rundir import RunDir

    run = RunDir(path)
    run.write_traffic(TrafficRecord(f"r{i:03d}", i * 0.01, "qa", COMPLETIONS,
                                    {"prompt": f"q{i}", "max_tokens": 8},
                                    reference={"kind": "judge", "answers": [f"a{i}"]})
                      for i in range(n))
    with run.open_store() as store:
        store.put_many([ArmResult(f"r{i:03d}", arm, "qa", True, ttft_s=0.1, e2e_s=0.2,
                                  output_text=f"a{i}", output_tokens=1, finish_reason="stop",
                                  max_tokens=8) for arm in ARMS for i in range(n)], worker="t")
        counts = store.counts_by_arm()
    run.write_manifest(Manifest(id="j", kind="replay", status="complete", created=now_iso(),
                                finished=now_iso(), config={"users": 1},
                                arms=dict.fromkeys(ARMS, "http://127.0.0.1:1"),
                                traffic=run.traffic_summary(n, None), counts=counts))
    return path


def test_the_accuracy_figures_score_a_judge_reference_by_its_verdict(tmp_path: Path):
    from layergate.exporters.figures.config import MetricsConfig
    from layergate.exporters.judgements import Judgement
    from layergate.harness.gate.fixed.evaluation import run_figures
    from layergate.harness.rundir import load_run

    def figures_of(path: Path) -> dict:
        return {(f.name, f.arm): f for f in run_figures(load_run(path), MetricsConfig(
            n_resamples=50, min_samples=5)) if f.scenario == "all"}

    run = _judged_run(tmp_path / "run")
    figures = figures_of(run)
    assert ("accuracy", BASELINE) in figures and figures["accuracy", BASELINE].n == 0
    # the baseline right on every request, the candidate wrong on the first 6, and no
    # verdict at all for r029's candidate output: left out, not counted wrong
    for i in range(30):
        for arm in (BASELINE, CANDIDATE):
            if arm == CANDIDATE and i == 29:
                continue
            append(run / FILE, Judgement(f"r{i:03d}", arm, not (arm == CANDIDATE and i < 6),
                                         "x", "m", "p", digest(f"a{i}")))
    figures = figures_of(run)
    assert figures["accuracy", BASELINE].value == 1.0 and figures["accuracy", BASELINE].n == 30
    assert figures["accuracy", CANDIDATE].n == 29
    assert figures["accuracy", CANDIDATE].value == pytest.approx(23 / 29)
    assert figures["accuracy_delta", CANDIDATE].value == pytest.approx(-6 / 29)


def test_the_judges_own_noise_is_a_figure(tmp_path: Path):
    """judge_disagreement: of the requests both baselines answered with the same text, the
    share the judge gave different verdicts; outputs that differ do not count."""
    from layergate.exporters.figures.config import MetricsConfig
    from layergate.exporters.judgements import Judgement
    from layergate.harness.gate.fixed.evaluation import run_figures
    from layergate.harness.rundir import load_run

    run = _judged_run(tmp_path / "run")
    figures = {(f.name, f.arm): f for f in run_figures(load_run(run), MetricsConfig(
        n_resamples=50, min_samples=5)) if f.scenario == "all"}
    assert ("judge_disagreement", BASELINE2) not in figures  # no verdict yet: nothing to say
    for i in range(30):  # the judge flips its verdict on A' for the first 3 of 30
        for arm in (BASELINE, BASELINE2):
            append(run / FILE, Judgement(f"r{i:03d}", arm, not (arm == BASELINE2 and i < 3),
                                         "x", "m", "p", digest(f"a{i}")))
    figures = {(f.name, f.arm): f for f in run_figures(load_run(run), MetricsConfig(
        n_resamples=200, min_samples=5)) if f.scenario == "all"}
    noise = figures["judge_disagreement", BASELINE2]
    assert noise.n == 30 and noise.value == pytest.approx(0.1)
    assert noise.ci_low < 0.1 < noise.ci_high
    from prometheus_client import CollectorRegistry, generate_latest

    from layergate.exporters.prometheus_export import register_run
    registry = CollectorRegistry()
    register_run(registry, "r1", list(figures.values()))
    assert 'layergate_run_judge_disagreement{arm="baseline2",run="r1",scenario="all"}' \
        in generate_latest(registry).decode()


@pytest.mark.model
def test_layergate_judge_on_a_run_directory(full_engine, tmp_path: Path):
    import subprocess

    from layergate.harness.processes import layergate_command

    run = _judged_run(tmp_path / "run", n=3)
    done = subprocess.run(layergate_command("judge", str(run), "--endpoint", full_engine.url,
                                            "--model", "smollm2-135m", "--no-progress"),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "judged 9 outputs (0 judged before)" in done.stdout
    assert "same verdict on" in done.stdout and len(read_judgements(run / FILE)) == 9
    bad = tmp_path / "prompt.txt"
    bad.write_text("Grade {answer}")
    refused = subprocess.run(layergate_command("judge", str(run), "--endpoint", full_engine.url,
                                               "--model", "m", "--prompt", str(bad)),
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "must use {output}" in refused.stderr
