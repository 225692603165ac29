"""static, dynamic and speculative on the real SmolLM2 model, in-process (one model load for
the module, shared by every engine here). Prompts are real requests of the bundled eval
traffic. Both sides of every comparison run batch-invariant, so the only difference between
them is the policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layergate.reference_engine.api import SamplingParams
from layergate.reference_engine.config import EngineConfig
from layergate.reference_engine.engine import Engine
from layergate.reference_engine.skip_policies.decider import Condition, Rule
from layergate.reference_engine.skip_policies.rules import RulesFile, SpeculativeDraft, save_rules
from tests.support.engine_runs import run_one, run_requests

pytestmark = pytest.mark.model

EVAL = Path(__file__).resolve().parents[1] / "scenarios" / "traffic" / "eval.jsonl"
GREEDY = SamplingParams(max_tokens=8, temperature=0.0)
SKIP = (12, 13, 14, 15, 17)  # low block influence on calibration traffic


def _eval_messages(count: int) -> list[list[dict]]:
    rows = [json.loads(line) for line in EVAL.read_text().splitlines() if line.strip()]
    chats = [r["body"]["messages"] for r in rows
             if sum(len(m["content"]) for m in r["body"]["messages"]) < 700]
    chats.sort(key=lambda m: sum(len(x["content"]) for x in m))
    step = len(chats) / count
    return [chats[int(i * step)] for i in range(count)]  # spread over the lengths


@pytest.fixture(scope="module")
def loaded(real_model):
    return real_model


@pytest.fixture(scope="module")
def prompts(loaded):
    tok = loaded.tokenizer
    out = []
    for messages in _eval_messages(20):
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        out.append(tok(text, add_special_tokens=False)["input_ids"])
    return out


def _engine(loaded, **kwargs) -> Engine:
    e = Engine(EngineConfig(threads=1, batch_invariant=True, **kwargs), loaded=loaded)
    e.start()
    return e


@pytest.fixture(scope="module")
def full(loaded):
    e = _engine(loaded)
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def full_out(full, prompts):
    return run_requests(full, prompts, GREEDY, timeout=300)


@pytest.fixture(scope="module")
def speculative(loaded):
    e = _engine(loaded, skip_policy="speculative", skip_layers=SKIP,
                skip_policy_options=(("gamma", 3),))
    yield e
    e.shutdown()


def test_speculative_greedy_is_token_identical_to_full(speculative, prompts, full_out):
    assert len({len(p) for p in prompts}) >= 12, "prompts of mixed lengths"
    got = run_requests(speculative, prompts, GREEDY, timeout=300)
    proposed = accepted = 0
    for i, (g, f) in enumerate(zip(got, full_out, strict=True)):
        assert g.token_ids == f.token_ids, f"prompt {i} diverged"
        assert g.finish.finish_reason == f.finish.finish_reason
        ext = g.finish.extension
        assert ext["policy"] == "speculative" and ext["layer_mask"] is None
        assert ext["token_ids"] == f.token_ids
        assert 0 <= ext["draft_tokens_accepted"] <= ext["draft_tokens_proposed"]
        proposed += ext["draft_tokens_proposed"]
        accepted += ext["draft_tokens_accepted"]
        assert len(ext["layers_executed_per_token"]) == len(g.token_ids)
    assert proposed > 0 and accepted > 0  # it really drafted, and some drafts were right


def test_speculative_edges_max_tokens_stop_and_drafts(loaded, speculative, full, prompts):
    for n in (1, 2, 4):
        params = SamplingParams(max_tokens=n, temperature=0.0)
        a, b = run_one(speculative, prompts[5], params), run_one(full, prompts[5], params)
        assert a.token_ids == b.token_ids and len(a.token_ids) <= n
        assert a.finish.finish_reason == b.finish.finish_reason
    ref = run_one(full, prompts[7], SamplingParams(max_tokens=16, temperature=0.0))
    words = ref.text.split()
    assert len(words) >= 4, ref.text
    params = SamplingParams(max_tokens=16, temperature=0.0, stop=(words[2],))
    a, b = run_one(speculative, prompts[7], params), run_one(full, prompts[7], params)
    assert a.finish.finish_reason == b.finish.finish_reason == "stop"
    assert a.text == b.text and words[2] not in a.text
    # early exit + an LM head cut to the 8192 first ids: verification keeps outputs identical
    other = _engine(loaded, skip_policy="speculative",
                    skip_policy_options=(("exit_after", 21), ("head_tokens", 8192), ("gamma", 2)))
    try:
        for p in prompts[:2]:
            params = SamplingParams(max_tokens=6, temperature=0.0)
            assert run_one(other, p, params).token_ids == run_one(full, p, params).token_ids
    finally:
        other.shutdown()


def test_speculative_sampling_is_seeded_and_counts_drafts(speculative, prompts, loaded):
    params = SamplingParams(max_tokens=10, temperature=0.8, top_p=0.95, seed=7)
    a, b = run_one(speculative, prompts[3], params), run_one(speculative, prompts[3], params)
    assert a.token_ids == b.token_ids and a.token_ids
    assert all(0 <= t < loaded.model.config.vocab_size for t in a.token_ids)
    ext = a.finish.extension
    assert 0 <= ext["draft_tokens_accepted"] <= ext["draft_tokens_proposed"]


def test_static_executes_exactly_30_minus_k_layers_per_token(loaded, prompts):
    skip = (3, 13, 14)
    e = _engine(loaded, skip_policy="static", skip_layers=skip)
    try:
        out = run_requests(e, prompts[:3], GREEDY)
    finally:
        e.shutdown()
    for o in out:
        ext = o.finish.extension
        assert ext["layers_executed_per_token"] == [27] * len(o.token_ids)
        assert [i for i, m in enumerate(ext["layer_mask"]) if not m] == list(skip)
        assert ext["theoretical_saving"] == pytest.approx(0.1)


@pytest.fixture
def dynamic(loaded, prompts, tmp_path_factory):
    """Prompts of at most `limit` tokens skip two layers; longer ones run full depth. A fresh
    engine (and prefix cache) per test; the model is shared."""
    limit = sorted(len(p) for p in prompts)[len(prompts) // 2]
    rules = RulesFile(
        model="smollm2-135m", num_layers=30, created="test", traffic={},
        dynamic=(Rule("short", (Condition("prompt_len", "<=", float(limit)),), (13, 14)),),
        speculative=SpeculativeDraft(skip=SKIP))
    path = save_rules(rules, tmp_path_factory.mktemp("rules") / "rules.json")
    e = _engine(loaded, skip_policy="dynamic", rules=str(path))
    yield e, limit
    e.shutdown()


def test_dynamic_same_prompt_same_mask_fixed_within_request(dynamic, prompts):
    e, limit = dynamic
    short = next(p for p in prompts if len(p) <= limit)
    long = next(p for p in prompts if len(p) > limit)
    a, b, c = run_one(e, short, GREEDY), run_one(e, short, GREEDY), run_one(e, long, GREEDY)
    ea, eb, ec = (o.finish.extension for o in (a, b, c))
    assert ea["layer_mask"] == eb["layer_mask"]
    assert ea["policy_fingerprint"] == eb["policy_fingerprint"]
    assert a.token_ids == b.token_ids
    assert [i for i, m in enumerate(ea["layer_mask"]) if not m] == [13, 14]
    assert ea["layers_executed_per_token"] == [28] * len(a.token_ids)
    assert ec["layer_mask"] == [1] * 30 and ec["layers_executed_per_token"] == [30] * len(
        c.token_ids)
    assert 0 <= ea["decision_time_s"] < 0.05


def test_prefix_cache_never_serves_kv_across_masks(loaded, dynamic, full, prompts):
    e, limit = dynamic
    short = next(p for p in prompts if len(p) <= limit)
    # shares the chat template's system block and the short prompt's text, but is longer
    longer = list(short[:-3]) + list(prompts[-1][len(short) - 3:])
    assert len(longer) > limit and longer[:16] == short[:16]
    # every chat prompt starts with the template's system block: the first block is shared
    stored = run_one(e, short, GREEDY)  # stores its blocks under the two-layer-skip mask
    assert stored.finish.extension["prefix_cache_hit_tokens"] == 0
    first = run_one(e, longer, GREEDY)
    assert first.finish.extension["layer_mask"] == [1] * 30
    assert first.finish.extension["prefix_cache_hit_tokens"] == 0
    assert first.token_ids == run_one(full, longer, GREEDY).token_ids
    again = run_one(e, longer, GREEDY)  # the same mask: now its own blocks are served
    assert again.finish.extension["prefix_cache_hit_tokens"] >= 16
    assert again.token_ids == first.token_ids
