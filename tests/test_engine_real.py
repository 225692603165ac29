"""The engine on the real SmolLM2 model: HF parity, sampling, endings, batching.

One model load for the module; Hugging Face `generate` and the engine share its weights.
"""

from __future__ import annotations

import pytest
import torch

from layergate.reference_engine.api import SamplingParams
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.engine import Engine
from layergate.reference_engine.extension import EXTENSION_KEYS
from tests.support.engine_runs import run_one, run_requests

pytestmark = pytest.mark.model

QUESTIONS = [
    "hi",
    "What is 2+2?",
    "Name three colors.",
    "Why is the sky blue?",
    "What is the capital of France?",
    "Translate 'good morning' into French, Spanish and German.",
    "Write a haiku about the sea and the wind blowing over the waves at night.",
    "Explain recursion to a five year old in two sentences, using an example with mirrors.",
    "List the planets of the solar system in order from the sun, with one fact each about "
    "their size, their moons and their rings, and say which one is the hottest and why.",
    "You are reviewing a pull request that renames a configuration option across a large "
    "Python codebase. Describe, step by step, how you would check that nothing was missed, "
    "which tools you would use, and what tests you would ask the author to add before merging.",
]
GREEDY = SamplingParams(max_tokens=16, temperature=0.0)


@pytest.fixture(scope="module")
def loaded(real_model):
    return real_model


@pytest.fixture(scope="module")
def prompts(loaded):
    tok = loaded.tokenizer
    return [list(tok.apply_chat_template([{"role": "user", "content": q}],
                                         add_generation_prompt=True, tokenize=True,
                                         return_dict=True)["input_ids"]) for q in QUESTIONS]


@pytest.fixture(scope="module")
def engine(loaded):
    e = Engine(EngineConfig(threads=1), loaded=loaded)
    e.start()
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def batch1(engine, prompts):
    """Each prompt alone (batch size 1): the reference for batching tests."""
    return [run_one(engine, p, GREEDY) for p in prompts]


def test_greedy_matches_hf_generate(loaded, prompts, batch1):
    assert len({len(p) for p in prompts}) >= 8, "prompts of mixed lengths"
    eos = loaded.tokenizer.eos_token_id
    for ids, got in zip(prompts, batch1, strict=True):
        ref = loaded.model.generate(torch.tensor([ids]), attention_mask=torch.ones(
            1, len(ids), dtype=torch.long), max_new_tokens=16, do_sample=False)[0, len(ids):]
        ref = ref.tolist()
        ended = bool(ref) and ref[-1] == eos
        expected = ref[:-1] if ended else ref
        assert got.token_ids == expected, loaded.tokenizer.decode(ids)
        assert got.finish.finish_reason == ("stop" if ended else "length")
        assert got.finish.completion_tokens == len(expected)


def test_extension_has_every_contract_key(batch1, loaded):
    ext = batch1[-1].finish.extension
    assert set(EXTENSION_KEYS) <= set(ext)
    assert ext["policy"] == "full" and ext["layers_total"] == loaded.num_layers == 30
    assert ext["layers_executed_per_token"] == [30] * len(batch1[-1].token_ids)
    assert ext["token_ids"] == batch1[-1].token_ids
    assert ext["theoretical_saving"] == 0.0 and ext["layer_mask"] == [1] * 30
    assert ext["peak_memory_bytes"] > 0 and ext["prefill_time_s"] > 0
    assert ext["computed_tokens"] >= len(batch1[-1].token_ids)


def test_batch_invariant_concurrent_match_batch_of_one(loaded, prompts, batch1):
    e = Engine(EngineConfig(threads=1, batch_invariant=True), loaded=loaded)
    e.start()
    try:
        got = run_requests(e, prompts[:8], GREEDY)
    finally:
        e.shutdown()
    assert all(o.finish.finish_reason in ("stop", "length") for o in got)
    assert [o.token_ids for o in got] == [o.token_ids for o in batch1[:8]]
    assert all(o.finish.extension["batch_invariant"] for o in got)


def test_batch_composition_flips_only_near_ties(engine, prompts, batch1, loaded):
    """Without --batch-invariant a batch changes the arithmetic a little, so a greedy output
    may part from its batch-size-1 reference, but only where the reference's two choices
    were (nearly) tied; up to there, and everywhere else, the tokens are the same."""
    compositions = {"all 10 together": [prompts],
                    "reversed, groups of 3": [prompts[::-1][i:i + 3] for i in (0, 3, 6, 9)]}
    reference = {tuple(p): o for p, o in zip(prompts, batch1, strict=True)}
    eos = loaded.tokenizer.eos_token_id
    for name, groups in compositions.items():
        for group in groups:
            for p, o in zip(group, run_requests(engine, group, GREEDY), strict=True):
                ref = reference[tuple(p)]
                if o.token_ids == ref.token_ids:
                    assert o.finish.finish_reason == ref.finish.finish_reason
                    continue
                # where they part: a differing token, or EOS where the other went on
                ended, ref_ended = o.token_ids + [eos], ref.token_ids + [eos]
                k = next(i for i, (a, b) in enumerate(zip(ended, ref_ended, strict=False))
                         if a != b)
                with torch.inference_mode():
                    logits = loaded.model(torch.tensor([p + ref.token_ids[:k]])).logits[0, -1]
                chosen = ref_ended[k], ended[k]
                gap = abs(float(logits[chosen[0]] - logits[chosen[1]]))
                assert gap < 0.05, (f"{name}: token {k} of {loaded.tokenizer.decode(p)!r} "
                                    f"moved from {chosen[0]} to {chosen[1]}, {gap:.3f} "
                                    "logits apart: not a near-tie")


def test_same_seed_same_sample(engine, prompts):
    p = SamplingParams(max_tokens=12, temperature=0.9, top_p=0.95, seed=1234)
    a = run_one(engine, prompts[3], p)
    b = run_one(engine, prompts[3], p)
    c = run_one(engine, prompts[3], SamplingParams(max_tokens=12, temperature=0.9,
                                                   top_p=0.95, seed=99))
    assert a.token_ids == b.token_ids and a.text == b.text
    assert a.token_ids != c.token_ids


def test_stop_sequence_cuts_text(engine, prompts, batch1):
    full_text = batch1[4].text  # "The capital of France is Paris."
    assert "Paris" in full_text
    got = run_one(engine, prompts[4], SamplingParams(max_tokens=16, temperature=0,
                                                    stop=("Paris",)))
    assert got.finish.finish_reason == "stop"
    assert got.text == full_text[:full_text.index("Paris")]


def test_max_tokens_and_eos(engine, prompts, batch1, loaded):
    got = run_one(engine, prompts[7], SamplingParams(max_tokens=3, temperature=0))
    assert got.finish.finish_reason == "length" and got.token_ids == batch1[7].token_ids[:3]
    ended = [o for o in batch1 if o.finish.finish_reason == "stop"]
    assert ended, "at least one prompt ends with EOS within 16 tokens"
    assert all(loaded.tokenizer.eos_token_id not in o.token_ids for o in ended)
    assert all(len(o.token_ids) < 16 for o in ended)


def test_logprobs_are_the_model_distribution(engine, prompts):
    got = run_one(engine, prompts[1], SamplingParams(max_tokens=4, temperature=0,
                                                    logprobs=True, top_logprobs=3))
    for t in got.tokens:
        assert t.logprob is not None and t.logprob <= 0
        assert len(t.top_logprobs) >= 1
        assert max(t.top_logprobs.values()) == pytest.approx(t.logprob)
