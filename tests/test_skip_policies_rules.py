"""Detector, decider and the rules file, without a model (embeddings are real tensors of
the shape the model gives; the decider and the file never see the model)."""

from __future__ import annotations

import json
import time

import pytest
import torch

from layergate.reference_engine.skip_policies.decider import Condition, Rule, decide, mask_without
from layergate.reference_engine.skip_policies.detector import FEATURES, detect
from layergate.reference_engine.skip_policies.rules import (
    FORMAT,
    RulesError,
    RulesFile,
    SpeculativeDraft,
    load_rules,
    save_rules,
)


def _rules(**overrides) -> RulesFile:
    base = dict(
        model="smollm2-135m", num_layers=30, created="2026-01-01T00:00:00Z",
        traffic={"path": "t.jsonl", "sha256": "ab" * 32, "count": 3},
        dynamic=(Rule("short", (Condition("prompt_len", "<=", 40.0),), (13, 14)),
                 Rule("calm", (Condition("grad_mean", "<", 0.5),
                               Condition("var_max", ">=", 0.01)), (12,))),
        static_skip=(13, 14, 15), speculative=SpeculativeDraft((12, 13), None, 8192, 3),
        info={"static": {"exact_match": 0.5}}, notes=("measured",))
    return RulesFile(**{**base, **overrides})


def test_detector_is_deterministic_and_cheap():
    g = torch.Generator().manual_seed(0)
    e = torch.randn(57, 576, generator=g)
    a, b = detect(e), detect(e.clone())
    assert a == b
    assert a.prompt_len == 57 and set(a.as_dict()) == set(FEATURES)
    assert a.var_max >= a.var_mean > 0 and a.grad_max >= a.grad_mean > 0
    assert detect(e[:1]).grad_max == 0.0
    t0 = time.perf_counter()
    for _ in range(100):
        detect(e)
    assert (time.perf_counter() - t0) / 100 < 0.01  # generous: the benchmark reports p99
    with pytest.raises(ValueError, match="T >= 1"):
        detect(torch.zeros(0, 576))


def test_decider_first_matching_rule_wins():
    g = torch.Generator().manual_seed(1)
    f = detect(torch.randn(20, 576, generator=g))
    rules = _rules().dynamic
    d = decide(f, rules, 30)
    assert d.rule == "short" and d.skipped == (13, 14)
    assert decide(f, rules, 30) == d  # stateless
    long = detect(torch.randn(80, 576, generator=g))
    assert decide(long, rules[:1], 30).mask == (True,) * 30
    assert decide(long, (Rule("always", (), (0,)),), 30).skipped == (0,)
    with pytest.raises(ValueError, match="out of range"):
        mask_without([30], 30)


def test_rules_round_trip(tmp_path):
    rules = _rules()
    path = save_rules(rules, tmp_path / "r.json")
    back = load_rules(path, model="smollm2-135m", num_layers=30)
    assert back.dynamic == rules.dynamic
    assert back.static_skip == rules.static_skip
    assert back.speculative == rules.speculative
    assert back.traffic == rules.traffic and back.notes == rules.notes
    assert back.info["static"] == {"exact_match": 0.5}
    assert save_rules(back, tmp_path / "again.json").read_text() == path.read_text()


def _write(tmp_path, obj) -> str:
    p = tmp_path / "bad.json"
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


@pytest.mark.parametrize("edit, field, words", [
    (lambda d: d.update(model="llama-7b"), "model", "calibrated for 'llama-7b'"),
    (lambda d: d.update(num_layers=32), "num_layers", "model has 30"),
    (lambda d: d.update(format="v0"), "format", "expected"),
    (lambda d: d["static"].update(skip=[3, 30]), "static.skip[1]", "unknown layer index 30"),
    (lambda d: d["dynamic"]["rules"][0].update(skip=[-1]), "dynamic.rules[0].skip[0]",
     "unknown layer index -1"),
    (lambda d: d["dynamic"]["rules"][1]["when"][0].update(op="=="),
     "dynamic.rules[1].when[0].op", "unknown operator"),
    (lambda d: d["dynamic"]["rules"][0]["when"][0].update(feature="entropy"),
     "dynamic.rules[0].when[0].feature", "unknown feature"),
    (lambda d: d["dynamic"]["rules"][0]["when"][0].update(value="big"),
     "dynamic.rules[0].when[0].value", "must be a number"),
    (lambda d: d["speculative"].update(gamma=0), "speculative.gamma", "out of range"),
    (lambda d: d["speculative"].update(exit_after=40), "speculative.exit_after", "out of range"),
    (lambda d: d.update(dynamic=[]), "dynamic", "must be an object"),
])
def test_malformed_rules_name_the_field(tmp_path, edit, field, words):
    obj = _rules().to_json()
    assert obj["format"] == FORMAT
    edit(obj)
    with pytest.raises(RulesError) as err:
        load_rules(_write(tmp_path, obj), model="smollm2-135m", num_layers=30)
    assert err.value.field == field
    assert words in str(err.value) and "bad.json" in str(err.value)


def test_unreadable_rules(tmp_path):
    with pytest.raises(RulesError, match="not valid JSON"):
        load_rules(_write(tmp_path, "{nope"))
    with pytest.raises(RulesError, match="cannot read"):
        load_rules(tmp_path / "missing.json")
