"""The catalogue is the only owner of the shared words: the calculators emit exactly its
figures (no more, no fewer), their noise-floor excess is where it says, the gate's policy
loader accepts every gateable figure and refuses the rest, and "the same output" means one
thing everywhere."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from layergate.exporters.catalogue import (
    ARMS,
    FIGURES,
    STAGE_BOUNDS,
    ExitCode,
    exit_code,
    figure_spec,
    gateable_figures,
    same_output,
    split_turn,
    stage_for,
)
from layergate.exporters.figures import OVERALL, Figure, capacity
from layergate.exporters.figures.capacity_step import StepArm
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.consistency import compare
from layergate.exporters.figures.recorded import recorded_result
from layergate.exporters.judgements import digest
from layergate.exporters.records import ArmResult, MetricsScrape
from layergate.exporters.references import parse_reference
from layergate.exporters.tool_calls import ToolCall
from layergate.harness.gate.policy import PolicyError, parse_policy
from layergate.harness.report.pairs import Pair

CFG = MetricsConfig(n_resamples=50, min_samples=2, min_determinism_prompts=1)


def _answer(rid: str, arm: str, scenario: str, i: int, **kw) -> ArmResult:
    ids = (1, 2, 3, 4 + (arm == "candidate" and i % 2))  # the candidate diverges on odd ids
    top = tuple({"a": math.log(0.6), "b": math.log(0.4)} for _ in ids)
    ext = {"theoretical_saving": 0.3 if arm == "candidate" else 0.0, "computed_tokens": 20,
           "peak_memory_bytes": 1000 + 10 * i, "prefix_cache_hit_tokens": 4 + i % 3,
           "prefix_cache_query_tokens": 12}
    if arm == "candidate":  # it drafts: the speculative figures
        ext |= {"draft_tokens_proposed": 6, "draft_tokens_accepted": 3 + i % 2, "draft_steps": 2}
    # what an answer is made of: a tool call on some, structured output on others, and
    # reasoning before the answer on all (the answer_parts figures and ttfat)
    city = "Lyon" if arm == "candidate" and i % 4 == 0 else "Paris"
    calls = (ToolCall("get_weather", json.dumps({"city": city})),) if i % 2 else ()
    valid = {"tool_calls": True} if calls else {"structured": i % 3 != 0}
    kw = {"tool_calls": calls, "schema_valid": valid, "reasoning_text": "let me think",
          "reasoning_tokens": 3 + (arm == "candidate"), "answer_ttft_s": 0.15} | kw
    return ArmResult(request_id=rid, arm=arm, scenario=scenario, ok=True,
                     e2e_s=1.0 + 0.1 * i, ttft_s=0.1, itl_s=(0.05, 0.06),
                     output_text=" ".join(map(str, ids)), output_tokens=len(ids),
                     prompt_tokens=12, finish_reason="stop", max_tokens=8, token_ids=ids,
                     top_logprobs=top, extension=ext, **kw)


def _scrape(arm: str, when: str, hits: int) -> MetricsScrape:
    return MetricsScrape(arm, when, f"layergate_prefix_cache_hits_total {hits}\n"
                                    f"layergate_prefix_cache_queries_total {3 * hits + 30}\n")


def _every_figure() -> list[Figure]:
    """A run that exercises every calculator: three arms in two scenarios, recorded
    responses, scrapes before and after, and a repeat suite."""
    results = []
    for i in range(9):
        rid, scenario = f"r{i}", ("short", "long")[i % 2]
        results += [_answer(rid, arm, scenario, i) for arm in ARMS]
        results.append(recorded_result(rid, scenario, {
            "choices": [{"finish_reason": "stop", "message": {"content": "1 2 3 4"}}],
            "usage": {"completion_tokens": 4}}))
    scrapes = [_scrape(arm, when, hits) for arm in ARMS
               for when, hits in (("before", 0), ("after", 10 + ARMS.index(arm)))]
    repeats = [_answer(f"p{i}", arm, "short", i, repeat=rep) for i in range(3)
               for arm in ("baseline", "candidate") for rep in range(3)]
    offsets = {f"r{i}": 2.0 * i for i in range(9)}  # the saturation check reads send times
    # a reference on every request: the accuracy figures (the candidate right on even ids)
    references = {f"r{i}": parse_reference({"kind": "exact", "answers": ["1 2 3 4"]})
                  for i in range(8)}
    # ... and a judge's verdicts on the last: the judge's own noise between the baselines
    references["r8"] = parse_reference({"kind": "judge", "answers": ["1 2 3 4"]})
    verdicts = {("r8", arm, digest("1 2 3 4")): True for arm in ARMS}
    # two conversations of several turns: the figures turn by turn
    positions = {"r0": ("a", 1), "r2": ("a", 2), "r4": ("a", 3), "r1": ("b", 1), "r3": ("b", 2)}
    return compute_figures(results, scrapes, determinism=repeats, config=CFG, offsets=offsets,
                           max_in_flight=4, references=references, verdicts=verdicts,
                           positions=positions)


def test_the_calculators_emit_exactly_the_catalogued_figures() -> None:
    figures = _every_figure()
    # a live figure a replay also gives (from the arms' own counts) is emitted too
    assert {split_turn(f.name)[0] for f in figures} == {name for name, f in FIGURES.items()
                                         if (not f.live or f.gateable) and not f.sweep}
    assert all(f.value is not None for f in figures if f.scenario == OVERALL
               and f.arm == "candidate"), [f for f in figures if f.value is None]


def test_the_noise_floor_excess_is_where_the_catalogue_says() -> None:
    figures = [f for f in _every_figure() if f.arm == "candidate" and f.scenario == OVERALL]
    carries = {split_turn(f.name)[0] for f in figures if "excess" in f.detail}
    assert carries == {name for name, spec in FIGURES.items() if spec.excess and not spec.sweep}


def test_the_capacity_calculators_emit_exactly_the_sweep_figures() -> None:
    def steps(arm: str, saving: float | None, points: list[tuple[float, float]]):
        return [StepArm(arm, load, tuple(i < att * 20 for i in range(20)), 0, 20 / load,
                        theoretical=saving) for load, att in points]

    sweep = [*steps("baseline", 0.0, [(1, 1.0), (2, 0.5)]),
             *steps("baseline2", 0.0, [(1, 1.0), (2, 0.6)]),
             *steps("candidate", 0.3, [(1, 1.0), (2, 1.0), (4, 0.5)])]
    figures = capacity.figures(sweep, capacity.SweepRule(resamples=50), "req/s")
    assert {f.name for f in figures} == {name for name, f in FIGURES.items() if f.sweep}
    carries = {f.name for f in figures if f.arm == "candidate" and "excess" in f.detail}
    assert carries == {name for name, f in FIGURES.items() if f.sweep and f.excess}


def test_the_docs_define_every_figure() -> None:
    metrics_doc = (Path(__file__).resolve().parents[1] / "docs" / "METRICS.md").read_text()
    assert [name for name in FIGURES if f"`{name}`" not in metrics_doc] == []


def test_a_figure_outside_the_catalogue_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown figure 'exact_mach'.*'exact_match'"):
        Figure("exact_mach", 1.0)
    assert Figure("e2e_p99", 1.0).unit == "s" and Figure("bleu", 1.0).unit == "score"


@pytest.mark.parametrize("name", gateable_figures())
def test_the_policy_loader_accepts_every_gateable_figure(name: str) -> None:
    spec = figure_spec(name)
    rule = {"threshold": 0.5, **({"subtract_noise_floor": True} if spec.excess else {})}
    policy = parse_policy({"metrics": {name: rule}})
    (loaded,) = policy.rules
    # the direction defaults to the good side the catalogue gives
    assert (loaded.name, loaded.direction) == (name, spec.direction)


@pytest.mark.parametrize("name", sorted(set(FIGURES) - set(gateable_figures())))
def test_the_policy_loader_refuses_a_figure_that_cannot_be_gated(name: str) -> None:
    with pytest.raises(PolicyError, match=f"metrics.{name}: {name} cannot be gated: .+"):
        parse_policy({"metrics": {name: {"threshold": 0.5}}})


def test_a_direction_against_the_figure_is_refused() -> None:
    with pytest.raises(PolicyError, match="higher is better, so the good side is '>='"):
        parse_policy({"metrics": {"exact_match": {"threshold": 0.9, "direction": "<="}}})
    with pytest.raises(PolicyError, match="e2e_p99 carries no excess"):
        parse_policy({"metrics": {"e2e_p99": {"threshold": 1.1,
                                                    "subtract_noise_floor": True}}})


def test_verdicts_and_exit_codes() -> None:
    assert [exit_code(v) for v in ("pass", "fail", "inconclusive")] == [0, 1, 3]
    assert (ExitCode.USAGE, ExitCode.INFRASTRUCTURE) == (2, 4)
    with pytest.raises(ValueError, match="unknown verdict 'passed'"):
        exit_code("passed")


def test_rollout_stage_follows_the_bounds() -> None:
    assert [stage_for(x) for x in (-0.9, -0.01, 0.0, 0.24, 0.25, 0.49, 0.5, 3)] == \
        ["internal", "internal", "vip", "vip", "public_5pct", "public_5pct", "full", "full"]
    moved = {**STAGE_BOUNDS, "full": 1.0}
    assert stage_for(0.7, moved) == "public_5pct"


def _text(text: str, ids: tuple[int, ...] | None = None) -> ArmResult:
    return ArmResult(request_id="1", arm="baseline", scenario="s", ok=True,
                     output_text=text, token_ids=ids)


@pytest.mark.parametrize(("a", "b", "same"), [
    (_text("a b", (1, 2)), _text("a  b", (1, 2)), True),  # ids decide when both have them
    (_text("a b", (1, 2)), _text("a b", (1, 3)), False),
    (_text("a b", (1, 2)), _text("a b"), True),  # else the text
    (_text("a b"), _text("a  b"), False),  # whitespace is part of the output
])
def test_one_same_output_for_every_consumer(a: ArmResult, b: ArmResult, same: bool) -> None:
    assert same_output(a, b) is same
    assert compare(a, b)[0] is same  # exact_match and first_divergence
    assert (Pair("1", "s", a, b).divergence is None) is same  # the report's diffs
