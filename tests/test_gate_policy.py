"""Gate policies: the shipped files load, and every mistake names the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from layergate.harness.gate import PolicyError, load_policy
from layergate.harness.gate.policy import default_policy_dir


def _write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shipped_policies_load_and_default_adds_rer_to_no_regression():
    no_reg = load_policy(default_policy_dir() / "no-regression.yaml")
    default = load_policy()
    strict = load_policy(default_policy_dir() / "strict.yaml")
    assert default.name == "default" and default.target_rer == pytest.approx(0.20)
    no_reg_names = {r.name for r in no_reg.rules}
    assert "rer" not in no_reg_names
    assert {r.name for r in default.rules} == no_reg_names | {"rer"}
    rules = {r.name: r for r in no_reg.rules}
    assert rules["termination_accuracy"].threshold == pytest.approx(0.925)
    assert rules["cache_hit_delta"].threshold == pytest.approx(0.05)
    assert rules["cache_hit_delta"].direction == "<="
    assert rules["exact_match"].subtract_noise_floor
    # a tolerance over the noise floor (B/A - A'/A), so that two identical arms can pass
    latency = rules["latency_ratio"]
    assert latency.direction == "<=" and latency.subtract_noise_floor
    assert latency.threshold == pytest.approx(0.10) and no_reg.process_spread > 0
    assert {r.name: r for r in default.rules}["rer"].threshold == pytest.approx(0.20)
    assert strict.gate_scenarios and strict.default_max_error_rate == 0.0
    assert "long" in strict.scenario_rules
    tight = load_policy(default_policy_dir() / "tight.yaml")
    rules = {r.name: r for r in tight.rules}
    assert tight.target_rer == pytest.approx(0.05)
    assert rules["rer"].threshold == pytest.approx(0.05)
    assert rules["latency_ratio"].threshold == pytest.approx(0.03)
    assert rules["latency_ratio"].subtract_noise_floor
    assert set(rules) == {r.name for r in default.rules}  # default's rules, tighter


def test_process_spread_is_a_policy_key(tmp_path):
    from layergate.harness.gate.fixed.evaluation import metrics_config
    from layergate.harness.rundir import load_run
    from tests.test_gate_cli import build_run

    run = load_run(build_run(tmp_path / "run"))
    policy = load_policy(_write(tmp_path, "process_spread: 0\nmetrics: {rer: {}}\n"))
    assert metrics_config(policy, run).process_spread == 0
    with pytest.raises(PolicyError, match="process_spread: must be in"):
        load_policy(_write(tmp_path, "process_spread: 2\nmetrics: {rer: {}}\n", "bad.yaml"))


@pytest.mark.parametrize(("text", "key", "hint"), [
    ("metrics: {exact_match: {direction: '>', threshold: 0}}", "metrics.exact_match.direction",
     "'>=' or '<='"),
    ("metrics: {exact_macth: {direction: '>=', threshold: 0}}", "metrics.exact_macth",
     "did you mean 'exact_match'"),
    ("metrics: {latency_ratio: {direction: '<='}}", "metrics.latency_ratio.threshold",
     "missing"),
    ("metrics: {latency_ratio: {direction: '<=', threshold: high}}",
     "metrics.latency_ratio.threshold", "expected a number"),
    ("metrics: {latency_ratio: {direction: '<=', threshold: 1.1, critcal: true}}",
     "metrics.latency_ratio.critcal", "did you mean 'critical'"),
    ("metrics: {e2e_p99: {direction: '<=', threshold: 1.1, "
     "subtract_noise_floor: true}}", "metrics.e2e_p99.subtract_noise_floor",
     "noise floor"),
    ("max_error_rate: 2\nmetrics: {rer: {direction: '>='}}", "max_error_rate", "[0, 1]"),
    ("max_error_rate: {candiate: 0.1}\nmetrics: {rer: {direction: '>='}}",
     "max_error_rate.candiate", "did you mean 'candidate'"),
    ("min_sample: 3\nmetrics: {rer: {direction: '>='}}", "min_sample", "did you mean"),
    ("metrics: {}", "metrics", "non-empty"),
    ("scenarios: {long: {rer: {direction: sideways}}}\nmetrics: {rer: {direction: '>='}}",
     "scenarios.long.rer.direction", "'>=' or '<='"),
    ("rollout: {vip: 0.5, full: 0.1}\nmetrics: {rer: {direction: '>='}}", "rollout",
     "must not decrease"),
])
def test_bad_policy_names_file_and_key(tmp_path, text, key, hint):
    path = _write(tmp_path, text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    message = str(info.value)
    assert str(path) in message and f"{key}:" in message and hint in message, message


def test_unreadable_and_invalid_yaml_and_circular_extends(tmp_path):
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "absent.yaml")
    with pytest.raises(PolicyError, match="not valid YAML"):
        load_policy(_write(tmp_path, "metrics: [unclosed"))
    _write(tmp_path, "extends: b.yaml\nmetrics: {rer: {direction: '>='}}", "a.yaml")
    _write(tmp_path, "extends: a.yaml", "b.yaml")
    with pytest.raises(PolicyError, match="circular"):
        load_policy(tmp_path / "a.yaml")


def test_extends_merges_rules_key_by_key(tmp_path):
    base = default_policy_dir() / "no-regression.yaml"
    path = _write(tmp_path, f"extends: {base}\nname: mine\ntarget_rer: 0.3\n"
                            "metrics: {exact_match: {threshold: -0.01}, rer: {direction: '>='}}")
    policy = load_policy(path)
    rules = {r.name: r for r in policy.rules}
    assert policy.name == "mine"
    assert rules["exact_match"].threshold == pytest.approx(-0.01)
    assert rules["exact_match"].subtract_noise_floor  # inherited
    assert rules["rer"].threshold == pytest.approx(0.3)  # defaults to target_rer


def test_policy_min_samples_below_the_default_is_honoured(tmp_path):
    """A policy asking 10 samples judges a 12-request run; the figures were once computed
    with the default minimum of 20 whatever the policy said, so every one was insufficient."""
    from layergate.harness.gate import evaluate
    from tests.test_gate_cli import Shape, build_run

    run = build_run(tmp_path / "run", Shape(n=12))
    policy = _write(tmp_path, "min_samples: 10\nmetrics:\n"
                              "  rer: {direction: '>=', threshold: 0.1}\n")
    result = evaluate(run, policy)
    rer = {c.name: c for c in result.overall}["rer"]
    assert rer.n == 12 and rer.status == "pass", rer.reason
    assert result.verdict == "pass"
    strict = _write(tmp_path, "min_samples: 20\nmetrics:\n"
                              "  rer: {direction: '>=', threshold: 0.1}\n", "strict.yaml")
    assert evaluate(run, strict).verdict == "inconclusive"


def test_cache_hit_excess_over_the_noise_floor_is_gateable(tmp_path):
    """docs/METRICS.md: the cache-hit delta's excess over the noise floor can be gated with
    subtract_noise_floor (the loader once refused it)."""
    from layergate.harness.gate import evaluate
    from tests.test_gate_cli import Shape, build_run, write_cache_scrapes

    text = ("metrics:\n  cache_hit_delta: {direction: '<=', threshold: 0.05, "
            "subtract_noise_floor: true}\n")
    policy = _write(tmp_path, text)
    rule = load_policy(policy).rules[0]
    assert rule.name == "cache_hit_delta" and rule.subtract_noise_floor
    # the baseline hit 6 of 12 tokens, the candidate 3: CHD 0.5 against a floor of 0
    lost = build_run(tmp_path / "lost", Shape(cache_hits=(6, 3)))
    check = {c.name: c for c in evaluate(lost, policy).overall}["cache_hit_delta"]
    assert check.subtract_noise_floor and check.noise_floor == 0.0
    assert check.compared == pytest.approx(0.5) and check.status == "fail"
    # baseline2 missing as many hits as the candidate: the excess is 0, and it passes
    same = build_run(tmp_path / "same", Shape(cache_hits=(6, 3)))
    write_cache_scrapes(same, "baseline2", 3 * 30, 12 * 30)
    check = {c.name: c for c in evaluate(same, policy).overall}["cache_hit_delta"]
    assert check.noise_floor == pytest.approx(0.5) and check.compared == pytest.approx(0.0)
