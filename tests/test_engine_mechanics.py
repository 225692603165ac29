"""Mechanics of the runner, the skip-policy seam and the scheduler on a tiny random Llama."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
import torch
from prometheus_client import CollectorRegistry

from layergate.reference_engine.api import FinishEvent, GenerationRequest, SamplingParams
from layergate.reference_engine.engine import Engine, QueueFull
from layergate.reference_engine.runner import ModelRunner
from layergate.reference_engine.sampling import RequestSampler, StopChecker
from layergate.reference_engine.skip_policies.base import SkipPolicy
from layergate.reference_engine.skip_policies.decider import Rule
from layergate.reference_engine.skip_policies.registry import (
    get_skip_policy,
    register,
    skip_policy_names,
)
from layergate.reference_engine.skip_policies.rules import RulesFile, SpeculativeDraft, save_rules
from tests.support.engine_runs import run_one, run_requests
from tests.support.tiny_llama import tiny_config, tiny_loaded, tiny_model

GREEDY = SamplingParams(max_tokens=8, temperature=0.0)


class SkipLayerOne(SkipPolicy):
    """Skips decoder layer 1 (test only)."""

    def decide(self, prompt_ids: Sequence[int], embeddings: torch.Tensor) -> Sequence[bool]:
        return [i != 1 for i in range(self.num_layers)]


@pytest.fixture(scope="module")
def loaded():
    torch.set_num_threads(1)
    return tiny_loaded(num_layers=4)


def engine_with(loaded, registry=None, skip_policy=None, **overrides) -> Engine:
    config = tiny_config(**overrides)
    instance = skip_policy(config, loaded.num_layers) if skip_policy else None
    e = Engine(config, registry, loaded=loaded, skip_policy=instance)
    e.start()
    return e


def prompts(n: int, base: int = 5, step: int = 9) -> list[list[int]]:
    return [list(range(100 + i, 100 + i + base + step * i)) for i in range(n)]


# ---- the runner (the layer seam) -------------------------------------------------------

def test_skipped_layer_passes_the_residual_and_writes_no_kv():
    runner = ModelRunner(tiny_model(4))
    cache = runner.new_cache()
    mask = (True, False, True, True)
    out = runner.forward([[5, 6, 7]], [cache], mask, return_hidden=True)
    assert out.layers_executed == 3
    assert torch.equal(out.hidden[2], out.hidden[1])  # layer 1 skipped: unchanged
    assert not torch.equal(out.hidden[3], out.hidden[2])
    assert cache.layers_written == [3, 0, 3, 3] and cache.length == 3
    early = runner.forward([[8]], [cache], (True,) * 4, exit_after=0)
    assert early.layers_executed == 1 and cache.layers_written == [4, 0, 3, 3]


def test_ragged_batch_equals_rows_alone():
    runner = ModelRunner(tiny_model(3))
    rows = [[1, 2, 3, 4, 5, 6, 7], [9, 8], [4, 4, 4, 4]]
    full = (True,) * 3
    caches = [runner.new_cache() for _ in rows]
    batched = runner.forward(rows, caches, full)
    assert batched.computed_tokens == 21 and batched.real_tokens == 13
    step = runner.forward([[11], [12], [13]], caches, full)
    for i, r in enumerate(rows):
        c = runner.new_cache()
        alone = runner.forward([r], [c], full)
        torch.testing.assert_close(batched.logits[i], alone.logits[0], atol=1e-5, rtol=1e-5)
        nxt = runner.forward([[11 + i]], [c], full)
        torch.testing.assert_close(step.logits[i], nxt.logits[0], atol=1e-5, rtol=1e-5)


def test_truncate_rolls_back_for_speculative_verification():
    runner = ModelRunner(tiny_model(2))
    full = (True, True)
    cache = runner.new_cache()
    runner.forward([[3, 4, 5]], [cache], full)
    ref = runner.forward([[6]], [cache], full).logits[0]
    runner.forward([[7, 8]], [cache], (True, False))  # a "draft" with fewer layers
    cache.truncate(3)
    assert cache.length == 3 and cache.layers_written == [3, 3]
    verify = runner.forward([[6, 9]], [cache], full, logits_for="all")
    torch.testing.assert_close(verify.logits[0, 0], ref, atol=1e-5, rtol=1e-5)


# ---- skip policies ---------------------------------------------------------------------

def test_registry_rejects_duplicates_and_suggests_names():
    with pytest.raises(ValueError, match="already registered"):
        register("full")(type("Other", (SkipPolicy,), {}))
    with pytest.raises(ValueError, match="Did you mean 'full'"):
        get_skip_policy("ful")


def test_every_name_the_registry_offers_serves_as_its_name_says(loaded, tmp_path):
    """Each registered name, through `EngineConfig.skip_policy` as `serve` passes it, on one
    rules file: `full` runs every layer, `static` drops the file's static set, `dynamic` the
    set of the rule that fires, and `speculative` drafts shallow yet answers as `full` does.
    The counts are the executor's (the response extension)."""
    rules = RulesFile(model="tiny-llama", num_layers=4, created="test", traffic={},
                      dynamic=(Rule("always", (), (2,)),), static_skip=(1,),
                      speculative=SpeculativeDraft(skip=(1, 2), gamma=2))
    path = save_rules(rules, tmp_path / "rules.json")
    masks = {"full": [1, 1, 1, 1], "static": [1, 0, 1, 1], "dynamic": [1, 1, 0, 1],
             "speculative": None}  # speculative has no fixed mask: draft, then verify
    assert set(skip_policy_names()) == set(masks)
    prompt = [5, 6, 7, 8, 9]
    got = {}
    for name in skip_policy_names():
        e = Engine(tiny_config(skip_policy=name, rules=str(path)), loaded=loaded)
        e.start()
        try:
            got[name] = run_one(e, prompt, GREEDY)
        finally:
            e.shutdown()
        ext = got[name].finish.extension
        assert ext["policy"] == name and ext["layer_mask"] == masks[name], name
        if masks[name] is not None:
            assert ext["layers_executed_per_token"] == [sum(masks[name])] * len(
                got[name].token_ids), name
    spec = got["speculative"].finish.extension
    assert got["speculative"].token_ids == got["full"].token_ids
    assert spec["draft_tokens_proposed"] > 0


def test_dry_run_reports_but_runs_every_layer(loaded):
    e = engine_with(loaded, skip_policy=SkipLayerOne, dry_run=True)
    try:
        ext = run_one(e, [5, 6, 7, 8], GREEDY).finish.extension
    finally:
        e.shutdown()
    assert ext["dry_run"] is True and ext["would_skip_layers"] == [1]
    assert set(ext["layers_executed_per_token"]) == {4} and ext["layer_mask"] == [1, 1, 1, 1]


def test_skip_policy_is_counted_by_the_executor(loaded):
    e = engine_with(loaded, skip_policy=SkipLayerOne)
    try:
        got = run_one(e, [5, 6, 7, 8], GREEDY)
    finally:
        e.shutdown()
    ext = got.finish.extension
    assert ext["layers_executed_per_token"] == [3] * len(got.token_ids)
    assert ext["layer_mask"] == [1, 0, 1, 1]
    assert ext["theoretical_saving"] == pytest.approx(0.25)


# ---- the scheduler ---------------------------------------------------------------------

def test_eight_concurrent_requests_complete_and_batch(loaded):
    registry = CollectorRegistry()
    e = engine_with(loaded, registry)
    try:
        got = run_requests(e, prompts(8), GREEDY)
    finally:
        e.shutdown()
    assert [o.finish.finish_reason for o in got] == ["length"] * 8
    assert all(len(o.token_ids) == 8 for o in got)
    count = registry.get_sample_value("layergate_batch_size_count", {"policy": "full"})
    total = registry.get_sample_value("layergate_batch_size_sum", {"policy": "full"})
    assert total / count > 1.5, "decode steps batched several sequences"
    assert registry.get_sample_value("layergate_requests_total", {
        "policy": "full", "status": "ok", "finish_reason": "length"}) == 8


def test_bucketed_padding_computes_fewer_positions_than_max(loaded):
    mixed = [list(range(10, 14)), list(range(20, 220)), list(range(30, 35)),
             list(range(40, 230))]
    computed = {}
    outputs = {}
    for padding in ("bucketed", "max"):
        registry = CollectorRegistry()
        e = engine_with(loaded, registry, padding=padding, prefix_cache="off")
        try:
            outputs[padding] = [o.token_ids for o in run_requests(e, mixed, GREEDY)]
        finally:
            e.shutdown()
        computed[padding] = registry.get_sample_value("layergate_computed_tokens_total",
                                                      {"policy": "full"})
    assert computed["bucketed"] < computed["max"]
    assert outputs["bucketed"] == outputs["max"]


def test_queue_full_raises_and_counts_a_rejection(loaded):
    registry = CollectorRegistry()
    e = Engine(tiny_config(max_queue=2), registry, loaded=loaded)  # not started: nothing drains
    req = [GenerationRequest(f"q{i}", (5, 6), GREEDY, time.perf_counter()) for i in range(3)]
    e.submit(req[0], lambda ev: None)
    e.submit(req[1], lambda ev: None)
    with pytest.raises(QueueFull):
        e.submit(req[2], lambda ev: None)
    assert e.queue_depth == 2
    assert registry.get_sample_value("layergate_requests_total", {
        "policy": "full", "status": "rejected", "finish_reason": "none"}) == 1
    e.shutdown(drain=False)


def test_bad_prompts_are_value_errors(loaded):
    e = Engine(tiny_config(max_model_len=16), loaded=loaded)
    for ids, msg in [((), "empty"), (tuple(range(20)), "context"), ((10**9,), "token ids")]:
        with pytest.raises(ValueError, match=msg):
            e.submit(GenerationRequest("bad", ids, GREEDY, time.perf_counter()), print)


def test_cancel_frees_the_slot(loaded):
    e = engine_with(loaded, max_batch_size=1)
    finished = threading.Event()
    reasons = []

    def sink(ev):
        if isinstance(ev, FinishEvent):
            reasons.append(ev.finish_reason)
            finished.set()

    long = SamplingParams(max_tokens=400, temperature=0.0)
    e.submit(GenerationRequest("long", (5, 6, 7), long, time.perf_counter()), sink)
    time.sleep(0.2)
    e.cancel("long")
    assert finished.wait(10) and reasons == ["cancelled"]
    assert run_one(e, [5, 6], GREEDY).finish.finish_reason == "length"  # the slot is free
    e.shutdown()
    assert e.running == 0


def test_shutdown_drains_in_flight_requests(loaded):
    e = engine_with(loaded)
    done = []
    for i in range(3):
        e.submit(GenerationRequest(f"d{i}", (5, 6, 7 + i), GREEDY, time.perf_counter()),
                 lambda ev: isinstance(ev, FinishEvent) and done.append(ev.finish_reason))
    e.shutdown(drain=True, timeout=30)
    assert done == ["length"] * 3
    with pytest.raises(QueueFull, match="shutting down"):
        e.submit(GenerationRequest("late", (5,), GREEDY, time.perf_counter()), print)


def test_stop_checker_holds_back_partial_stop_text(loaded):
    tok = loaded.tokenizer
    ids = tok.encode("Hello world, this is the end of it")
    checker = StopChecker(tok, ("the end",))
    text = "".join(checker.push(t) for t in ids)
    assert checker.stopped and text == "Hello world, this is "


def test_seeded_sample_does_not_depend_on_the_batch(loaded):
    seeded = SamplingParams(max_tokens=8, temperature=1.0, top_p=0.9, seed=7)
    e = engine_with(loaded, batch_invariant=True)
    try:
        alone = run_one(e, [5, 6, 7], seeded).token_ids
        crowd = run_requests(e, [[5, 6, 7], *prompts(3)],
                             [seeded] + [SamplingParams(max_tokens=8, temperature=1.0)] * 3)
    finally:
        e.shutdown()
    assert crowd[0].token_ids == alone


def test_tiny_top_p_is_greedy():
    logits = torch.randn(1000, generator=torch.Generator().manual_seed(3))
    sampler = RequestSampler(SamplingParams(temperature=1.0, top_p=1e-6, seed=1))
    assert all(sampler.choose(logits) == int(logits.argmax()) for _ in range(20))
    wide = RequestSampler(SamplingParams(temperature=1.0, top_p=1.0, seed=1))
    assert len({wide.choose(logits) for _ in range(50)}) > 1
