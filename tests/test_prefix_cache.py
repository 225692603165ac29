"""The prefix cache: hits on shared prefixes, misses across layer sets, LRU under a budget,
and outputs token-identical with it on or off (and with either padding)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch
from prometheus_client import CollectorRegistry

from layergate.reference_engine.api import SamplingParams
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.engine import Engine
from layergate.reference_engine.prefix_cache import PrefixCache, block_hashes
from layergate.reference_engine.runner import ModelRunner
from layergate.reference_engine.skip_policies.base import SkipPolicy, mask_fingerprint
from tests.support.engine_runs import run_one, run_requests
from tests.support.tiny_llama import tiny_config, tiny_loaded, tiny_model

GREEDY = SamplingParams(max_tokens=8, temperature=0.0)
SYSTEM = list(range(200, 240))  # 40 shared tokens: two full 16-token blocks


class SkipOnOddLastToken(SkipPolicy):
    """Skips layer 1 when the prompt's last token is odd (test only): the same prefix ends
    up under two different executed layer sets."""

    def decide(self, prompt_ids: Sequence[int], embeddings: torch.Tensor) -> Sequence[bool]:
        return [not (i == 1 and prompt_ids[-1] % 2) for i in range(self.num_layers)]


@pytest.fixture(scope="module")
def loaded():
    torch.set_num_threads(1)
    return tiny_loaded(num_layers=4)


def hits(registry: CollectorRegistry, policy: str) -> tuple[float, float]:
    labels = {"policy": policy}
    return (registry.get_sample_value("layergate_prefix_cache_queries_total", labels),
            registry.get_sample_value("layergate_prefix_cache_hits_total", labels))


def test_repeated_system_prompt_hits(loaded):
    registry = CollectorRegistry()
    e = Engine(tiny_config(), registry, loaded=loaded)
    e.start()
    try:
        first = run_one(e, SYSTEM + [7, 8, 9], GREEDY).finish.extension
        second = run_one(e, SYSTEM + [10, 11], GREEDY).finish.extension
    finally:
        e.shutdown()
    assert first["prefix_cache_hit_tokens"] == 0
    assert second["prefix_cache_hit_tokens"] == 32
    assert second["prefix_cache_query_tokens"] == 42
    assert hits(registry, "full") == (43 + 42, 32)


def test_a_different_layer_set_misses(loaded):
    registry = CollectorRegistry()
    config = tiny_config()
    e = Engine(config, registry, loaded=loaded, skip_policy=SkipOnOddLastToken(config, 4))
    e.start()
    try:
        a = run_one(e, SYSTEM + [7, 8], GREEDY).finish.extension  # even: full depth
        b = run_one(e, SYSTEM + [7, 9], GREEDY).finish.extension  # odd: layer 1 skipped
        c = run_one(e, SYSTEM + [5, 4], GREEDY).finish.extension  # even again: hits
    finally:
        e.shutdown()
    assert a["policy_fingerprint"] != b["policy_fingerprint"]
    assert b["prefix_cache_hit_tokens"] == 0
    assert c["policy_fingerprint"] == a["policy_fingerprint"]
    assert c["prefix_cache_hit_tokens"] == 32


def test_lru_eviction_keeps_the_budget():
    runner = ModelRunner(tiny_model(2))
    fp = mask_fingerprint((True, True))
    block_bytes = 16 * runner.kv_bytes_per_token
    cache = PrefixCache(block=16, budget_bytes=3 * block_bytes)
    prompts = [list(range(k * 1000, k * 1000 + 33)) for k in range(3)]  # 2 blocks each
    for p in prompts:
        kv = runner.new_cache()
        runner.forward([p], [kv], (True, True))
        cache.store(fp, p, kv)
        assert cache.nbytes <= cache.budget_bytes
    assert len(cache) == 3
    probe = runner.new_cache()
    assert cache.load(fp, prompts[0], probe).hit_tokens == 0  # oldest blocks evicted
    probe = runner.new_cache()
    assert cache.load(fp, prompts[2], probe).hit_tokens == 32
    assert probe.length == 32 and probe.layers_written == [32, 32]


def test_block_hashes_chain_the_whole_prefix():
    a = block_hashes("fp", list(range(40)), 16)
    b = block_hashes("fp", [999] + list(range(1, 40)), 16)
    assert len(a) == 2 and a[0] != b[0] and a[1] != b[1]  # a change in block 0 reaches block 1
    assert block_hashes("other", list(range(40)), 16)[0] != a[0]


@pytest.mark.model
def test_real_model_outputs_identical_with_cache_and_padding_switches(real_model):
    loaded = real_model
    tok = loaded.tokenizer
    system = ("You are a careful assistant for a hardware store. Answer in one short "
              "sentence, name the aisle when you can, and never invent products.")
    questions = ["Where are the nails?", "Do you sell paint brushes for oil paint?",
                 "hi", "Which glue works on wood and on metal and dries in under an hour?"]
    prompts = [list(tok.apply_chat_template(
        [{"role": "system", "content": system}, {"role": "user", "content": q}],
        add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
        for q in questions]
    params = SamplingParams(max_tokens=12, temperature=0.0)
    outputs = {}
    for cache, padding in (("off", "bucketed"), ("on", "bucketed"), ("off", "max")):
        e = Engine(EngineConfig(threads=1, prefix_cache=cache, padding=padding),
                   loaded=loaded)
        e.start()
        try:
            warm = run_one(e, prompts[0], params)  # fills the cache when it is on
            rest = run_requests(e, prompts[1:], params)  # batched: padding matters
        finally:
            e.shutdown()
        hit = sum(o.finish.extension["prefix_cache_hit_tokens"] for o in rest)
        assert (hit > 0) == (cache == "on")
        outputs[cache, padding] = [o.token_ids for o in [warm, *rest]]
    reference = outputs["off", "bucketed"]
    assert all(o == reference for o in outputs.values()), outputs
