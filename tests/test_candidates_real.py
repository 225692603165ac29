"""Two real candidates in one replay beside one pair of baselines (the real SmolLM2, one torch
thread per engine): static pruning of 12 layers fails on consistency; self-speculative
decoding is token-identical to the baseline and passes it, its drafts accepted."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from layergate.exporters.catalogue import FAIL, OVERALL, PASS, SPEC_ACCEPT_LENGTH, SPEC_FIGURES
from layergate.harness.gate.fixed.evaluation import metrics_config
from layergate.harness.gate.fixed.family import candidate_figures, evaluate_family
from layergate.harness.gate.policy import parse_policy
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.rundir import load_run
from layergate.harness.stack.demo_config import CANDIDATES
from layergate.harness.stack.engines import start_engine

pytestmark = [pytest.mark.locust]

N = 10  # requests: the policy's minimum
PROMPTS = ["Name a colour.", "Say hello.", "What is two plus two?",
           "Explain in one sentence what a prefix cache does in an LLM server.",
           "Give me two tips for writing clear commit messages, briefly.",
           "Name three fruits."]
POLICY = {"name": "consistency", "min_samples": 10,
          "metrics": {"exact_match": {"threshold": -0.10, "subtract_noise_floor": True}}}


@pytest.mark.model
@pytest.mark.slow
def test_static_fails_on_consistency_and_speculative_is_token_identical(
        full_engine, tmp_path: Path) -> None:
    traffic = tmp_path / "traffic.jsonl"
    traffic.write_text("".join(json.dumps({
        "id": f"r-{i}", "offset_s": 0.0, "scenario": "short",
        "endpoint": "/v1/chat/completions",
        "body": {"messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                 "max_tokens": 8, "temperature": 0}}) + "\n" for i in range(N)))
    static_args = CANDIDATES["static"].switches()  # the demo's: 12 least influential layers
    assert len(static_args[1].split(",")) == 12
    with ThreadPoolExecutor(2) as pool:  # both load the model at once
        starting = [pool.submit(start_engine, "--skip-policy", "static", *static_args),
                    pool.submit(start_engine, "--skip-policy", "speculative")]
    engines = [f.result() for f in starting if f.exception() is None]
    try:
        static, speculative = (f.result() for f in starting)  # the first failure, if any
        arms = {"baseline": full_engine.url, "baseline2": full_engine.url,
                "static": static.url, "speculative": speculative.url}
        run_dir = run_replay(ReplayConfig(out=tmp_path / "run", arms=arms, traffic=traffic,
                                          users=2, progress=False))
    finally:
        for e in engines:
            e.stop()
    run = load_run(run_dir)
    assert run.complete and all(r.ok for r in run.results), [r.error for r in run.results]
    ids = {(r.request_id, r.arm): r.token_ids for r in run.results}
    assert all(ids[(f"r-{i}", "speculative")] == ids[(f"r-{i}", "baseline")]
               for i in range(N)), "speculative decoding changed a greedy output"
    family = evaluate_family(run, parse_policy(POLICY))
    verdicts = {c.name: c.verdict for c in family.candidates}
    assert verdicts == {"static": FAIL, "speculative": PASS}, \
        {c.name: c.result.reasons for c in family.candidates}
    assert family.recommended is not None and family.recommended.name == "speculative"
    # its drafts' health from its answers' extension: more than one token per verification
    # pass, with an interval; static pruning drafts nothing and has none of the figures
    spec = {(f.name, f.arm): f for f in candidate_figures(run, metrics_config(
        parse_policy(POLICY), run)) if f.name in SPEC_FIGURES and f.scenario == OVERALL}
    length = spec[SPEC_ACCEPT_LENGTH, "speculative"]
    assert length.detail["source"] == "answers" and length.n == N
    assert 1 < length.ci_low <= length.value <= length.ci_high, length
    assert not [k for k in spec if k[1] != "speculative"], spec
