"""`layergate gate` on constructed run directories, through click's CliRunner: the exit code
of every verdict and fail-closed case, and the JSON / JUnit reports read back."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from junitparser import Error, Failure, JUnitXml, Skipped

from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord
from layergate.harness.cli import main
from layergate.harness.manifest import Manifest
from layergate.harness.rundir import RunDir

ARMS = {"baseline": "http://127.0.0.1:9001", "baseline2": "http://127.0.0.1:9002",
        "candidate": "http://127.0.0.1:9003"}
SCENARIOS = ("short", "medium", "long")
WORDS = ("the model skips layers when the next token is easy and runs all of them when it is "
         "hard so the answer stays the same").split()


@dataclass(frozen=True)
class Shape:
    """How the constructed candidate differs from the baseline."""

    n: int = 30
    speed: float = 0.6  # candidate E2E per token as a share of the baseline's
    diverge_every: int = 0  # every k-th request's candidate output diverges (0: never)
    errors: int = 0  # candidate requests that failed
    status: str = "complete"
    layers: int = 20  # layers the candidate executes per token (the model has 30)
    # prefix-cache hit tokens per request (of 12 queried) of the baselines and the candidate;
    # None: no hits and no /metrics scrapes
    cache_hits: tuple[int, int] | None = None


def _row(rid: str, arm: str, scenario: str, tokens: list[int], e2e: float, layers: int,
         ok: bool = True, hits: int = 0) -> ArmResult:
    if not ok:
        return ArmResult(request_id=rid, arm=arm, scenario=scenario, ok=False,
                         error="HTTP 503: overloaded", http_status=503)
    n = len(tokens)
    return ArmResult(
        request_id=rid, arm=arm, scenario=scenario, ok=True, http_status=200,
        ttft_s=e2e * 0.15, e2e_s=e2e, itl_s=tuple([e2e * 0.85 / (n - 1)] * (n - 1)),
        output_text=" ".join(WORDS[t % len(WORDS)] for t in tokens), output_tokens=n,
        prompt_tokens=12, finish_reason="stop", max_tokens=64, token_ids=tuple(tokens),
        extension={"policy": "full" if layers == 30 else "static", "layers_total": 30,
                   "layers_executed_per_token": [layers] * n,
                   "mean_layers_executed": float(layers),
                   "theoretical_saving": 1 - layers / 30, "computed_tokens": n + 12,
                   "prefix_cache_query_tokens": 12, "prefix_cache_hit_tokens": hits,
                   "peak_memory_bytes": 1_000_000})


def build_run(path: Path, shape: Shape = Shape(), seed: int = 0) -> Path:
    """A run directory with baseline, baseline2 and candidate written through the store."""
    rng = random.Random(seed)
    run = RunDir(path)
    base_hits, cand_hits = shape.cache_hits or (0, 0)
    with run.open_store() as store:
        for i in range(shape.n):
            rid, scenario = f"req-{i:04d}", SCENARIOS[i % 3]
            tokens = [rng.randrange(len(WORDS)) for _ in range(rng.randrange(8, 24))]
            cand = list(tokens)
            if shape.diverge_every and i % shape.diverge_every == 0:
                cut = rng.randrange(len(cand) // 2)
                cand[cut:] = [(t + 1) % len(WORDS) for t in cand[cut:]]
            per_token = rng.uniform(0.04, 0.06)
            for arm in ("baseline", "baseline2"):
                jitter = rng.uniform(0.97, 1.03)
                store.put(_row(rid, arm, scenario, tokens, per_token * len(tokens) * jitter, 30,
                               hits=base_hits))
            e2e = per_token * len(cand) * shape.speed * rng.uniform(0.97, 1.03)
            store.put(_row(rid, "candidate", scenario, cand, e2e, shape.layers,
                           ok=i >= shape.errors, hits=cand_hits))
    if shape.cache_hits is not None:
        for arm in ARMS:
            hits = (cand_hits if arm == "candidate" else base_hits) * shape.n
            write_cache_scrapes(path, arm, hits, 12 * shape.n)
    counts = {arm: {"ok": shape.n, "error": 0} for arm in ARMS}
    manifest = Manifest.new("replay", {"constructed": True}, ARMS,
                            {"path": "traffic.jsonl", "sha256": "0" * 64, "count": shape.n})
    run.write_manifest(manifest.with_status(shape.status, counts))
    return path


def write_cache_scrapes(run_dir: Path, arm: str, hits: int, queries: int) -> None:
    """The arm's `/metrics` before (zero) and after the run, prefix-cache counters only."""
    for when, (h, q) in (("before", (0, 0)), ("after", (hits, queries))):
        RunDir(run_dir).write_scrape(arm, when,
                                     "# TYPE layergate_prefix_cache_hits_total counter\n"
                                     f"layergate_prefix_cache_hits_total {h}\n"
                                     "# TYPE layergate_prefix_cache_queries_total counter\n"
                                     f"layergate_prefix_cache_queries_total {q}\n")


def add_determinism(run_dir: Path, status: str = "complete", prompts: int = 6,
                    repeats: int = 3) -> Path:
    """A `determinism/` sub-run: the candidate answering each prompt identically."""
    sub = RunDir(run_dir).determinism
    with sub.open_store() as store:
        for i in range(prompts):
            row = _row(f"det-{i}", "candidate", SCENARIOS[i % 3], [i, i + 1, 2], 0.2, 30)
            for k in range(repeats):
                store.put(replace(row, repeat=k))
    manifest = Manifest.new("determinism", {}, {"candidate": ARMS["candidate"]},
                            {"path": "traffic.jsonl", "sha256": "0" * 64, "count": prompts})
    sub.write_manifest(manifest.with_status(status, {}))
    return run_dir


def gate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["gate", *map(str, args)])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {
        "good": build_run(root / "good"),
        "identical": build_run(root / "identical", Shape(speed=1.0, layers=30,
                                                         cache_hits=(6, 6))),
        "cache_lost": build_run(root / "cache_lost", Shape(cache_hits=(6, 3))),
        "diverging": build_run(root / "diverging", Shape(diverge_every=2)),
        "small": build_run(root / "small", Shape(n=9)),
        "errors": build_run(root / "errors", Shape(errors=3)),
        "interrupted": build_run(root / "interrupted", Shape(status="interrupted")),
        "deterministic": add_determinism(build_run(root / "deterministic")),
        "determinism_cut": add_determinism(build_run(root / "determinism_cut"),
                                           status="interrupted"),
    }


def test_pass_writes_every_report(runs, tmp_path):
    out = {k: tmp_path / f"gate.{k}" for k in ("json", "junit", "markdown", "html")}
    code, output = gate(runs["good"], "--json", out["json"], "--junit", out["junit"],
                        "--markdown", out["markdown"], "--html", out["html"])
    assert code == 0, output
    assert "PASS" in output and "Rollout" in output
    report = json.loads(out["json"].read_text())
    assert list(report) == ["verdict", "run", "metrics", "scenarios"]
    assert report["verdict"] == "pass"
    assert set(report["run"]["arms"]) == set(ARMS)
    assert report["run"]["requests"]["candidate"] == {"ok": 30, "error": 0}
    assert set(report["scenarios"]) == set(SCENARIOS)
    rer = report["metrics"]["rer"]
    assert set(rer) >= {"value", "ci_low", "ci_high", "threshold", "direction", "status",
                        "noise_floor"}
    assert rer["status"] == "pass" and rer["threshold"] == pytest.approx(0.2)
    assert rer["ci_low"] > 0.3  # the candidate is 40 % faster per token
    exact = report["metrics"]["exact_match"]
    assert exact["value"] == 1.0 and exact["noise_floor"] == 1.0 and exact["status"] == "pass"
    assert report["run"]["rollout"]["stage"] in ("public_5pct", "full")
    assert "PASS" in out["markdown"].read_text()
    assert out["html"].read_text().count("data:image/png;base64,") == 5


def test_identical_arms_pass_no_regression_and_fail_default_on_rer_alone(runs, tmp_path):
    code, output = gate(runs["identical"], "--policy", _policy_file("no-regression.yaml"))
    assert code == 0, output
    path = tmp_path / "aa.json"
    code, output = gate(runs["identical"], "--json", path)
    assert code == 1, output
    report = json.loads(path.read_text())
    failed = [k for k, m in report["metrics"].items() if m["status"] == "fail"]
    assert failed == ["rer"], report["run"]["reasons"]
    chd = report["metrics"]["cache_hit_delta"]
    assert (chd["value"], chd["ci_low"], chd["ci_high"], chd["status"]) == (0, 0, 0, "pass")


def test_a_candidate_that_lost_prefix_cache_hits_fails_no_regression(runs, tmp_path):
    path = tmp_path / "chd.json"
    code, output = gate(runs["cache_lost"], "--policy", _policy_file("no-regression.yaml"),
                        "--json", path)
    assert code == 1, output
    chd = json.loads(path.read_text())["metrics"]["cache_hit_delta"]
    # h_A = 6 / 12, h_B = 3 / 12: |0.25 - 0.5| / 0.5, every request alike so the CI is tight
    assert chd["value"] == pytest.approx(0.5) and chd["status"] == "fail"
    assert chd["ci_low"] == pytest.approx(0.5) and chd["ci_high"] == pytest.approx(0.5)


def test_diverging_candidate_fails_with_junit_failure_messages(runs, tmp_path):
    path = tmp_path / "gate.xml"
    code, output = gate(runs["diverging"], "--junit", path)
    assert code == 1, output
    # the terminal table lists the worst first: the failing gate before the passing ones
    assert output.index("exact_match") < output.index("latency_ratio") < output.index("chrf")
    cases = {(case.classname, case.name): case
             for suite in JUnitXml.fromfile(str(path)) for case in suite}
    # one test case per metric x scenario
    assert {c for c, _ in cases} == {f"layergate.gate.{s}" for s in ("all", *SCENARIOS)}
    exact = cases[("layergate.gate.all", "exact_match")]
    failures = [r for r in exact.result if isinstance(r, Failure)]
    assert len(failures) == 1
    message = failures[0].message
    for part in ("value 0.5", "CI [", "noise floor 1", "excess", "threshold excess >= -0.1"):
        assert part in message, message
    # per-scenario rows are not gating under default.yaml: reported as skipped, not failures
    scenario_exact = cases[("layergate.gate.long", "exact_match")]
    assert all(isinstance(r, Skipped) for r in scenario_exact.result)
    passed = cases[("layergate.gate.all", "termination_accuracy")]
    assert passed.is_passed


def test_too_few_requests_is_inconclusive(runs, tmp_path):
    path = tmp_path / "gate.xml"
    code, output = gate(runs["small"], "--junit", path)
    assert code == 3, output
    assert "INCONCLUSIVE" in output
    cases = {case.name: case for suite in JUnitXml.fromfile(str(path)) for case in suite
             if case.classname == "layergate.gate.all"}
    assert any(isinstance(r, Error) for r in cases["rer"].result)


def test_error_rate_over_limit_fails_closed(runs):
    code, output = gate(runs["errors"])
    assert code == 1, output
    assert "error_rate" in output and "3 of 30 requests failed" in output


def test_interrupted_run_fails_closed(runs):
    code, output = gate(runs["interrupted"])
    assert code == 1, output
    assert "interrupted" in output


def test_determinism_sub_run_is_judged_and_must_be_complete(runs, tmp_path):
    path = tmp_path / "det.json"
    code, output = gate(runs["deterministic"], "--json", path)
    assert code == 0, output
    determinism = json.loads(path.read_text())["metrics"]["output_determinism"]
    assert determinism["status"] == "pass" and determinism["value"] == 1.0
    assert determinism["n"] == 6
    code, output = gate(runs["determinism_cut"])
    assert code == 1, output
    assert "determinism_complete" in output


def test_missing_required_figure_is_inconclusive(runs, tmp_path):
    # token_kl needs logprobs, which this run did not ask for
    policy = tmp_path / "kl.yaml"
    policy.write_text(f"extends: {_policy_file('no-regression.yaml')}\nname: kl\n"
                      "metrics: {token_kl: {direction: '<=', threshold: 0.1}}\n")
    code, output = gate(runs["good"], "--policy", policy)
    assert code == 3, output
    assert "token_kl" in output


def test_unreadable_run_dir_is_an_infrastructure_error(tmp_path):
    code, output = gate(tmp_path / "absent")
    assert code == 4 and "no such run directory" in output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{not json")
    code, output = gate(broken)
    assert code == 4 and "manifest" in output


def test_bad_policy_is_a_usage_error(runs, tmp_path):
    policy = tmp_path / "bad.yaml"
    policy.write_text("metrics:\n  rer: {direction: '=>'}\n")
    code, output = gate(runs["good"], "--policy", policy)
    assert code == 2
    assert str(policy) in output and "metrics.rer.direction" in output
    code, output = gate(runs["good"], "--policy", tmp_path / "absent.yaml")
    assert code == 2 and "cannot read policy file" in output


def _policy_file(name: str) -> Path:
    from layergate.harness.gate.policy import default_policy_dir

    return default_policy_dir() / name


def add_recordings(run_dir: Path, response: dict, n: int = 30) -> Path:
    """traffic.jsonl for `build_run`'s requests, every 2nd recording `response`, plus a
    recorded request the run never replayed."""
    records = [TrafficRecord(f"req-{i:04d}", i * 0.1, SCENARIOS[i % 3], "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": f"q{i}"}],
                              "max_tokens": 64}, response if i % 2 == 0 else None)
               for i in range(n)]
    records.append(TrafficRecord("not-replayed", 9.0, "other", "/v1/chat/completions",
                                 {"messages": [{"role": "user", "content": "q"}]}, response))
    RunDir(run_dir).write_traffic(records)
    return run_dir


# a recording from another server that ran to the length limit (64); every arm stops earlier
OTHER_SERVER = {"choices": [{"finish_reason": "length", "message": {"content": "x"}}],
                "usage": {"completion_tokens": 64}}


def test_metrics_and_gate_agree_on_termination_with_recorded_responses(tmp_path):
    run = add_recordings(build_run(tmp_path / "run"), OTHER_SERVER)
    figures = tmp_path / "figures.json"
    result = CliRunner().invoke(main, ["metrics", str(run), "--json", str(figures)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "gate.json"
    code, output = gate(run, "--json", out)
    assert code == 0, output  # the recording does not fail an unchanged ending
    report = json.loads(out.read_text())
    doc = json.loads(figures.read_text())

    def figure(name: str) -> dict:
        return next(f for f in doc["figures"]
                    if (f["name"], f["arm"], f["scenario"]) == (name, "candidate", "all"))

    ta, gated = figure("termination_accuracy"), report["metrics"]["termination_accuracy"]
    assert ta["value"] == gated["value"] == 1.0  # against the baseline in both
    assert (ta["ci_low"], ta["ci_high"], ta["n"]) == (gated["ci_low"], gated["ci_high"],
                                                      gated["n"])
    rec, info = figure("termination_accuracy_recorded"), \
        report["metrics"]["termination_accuracy_recorded"]
    assert rec["value"] == info["value"] == 0.0 and rec["n"] == info["n"] == 15
    assert info["status"] == "info" and info["noise_floor"] == 0.0  # the baseline's: also 0
    assert "other" not in report["scenarios"]  # the unreplayed recording added nothing


def test_malformed_recorded_response_is_an_infrastructure_error(tmp_path):
    run = add_recordings(build_run(tmp_path / "run"), {"choices": [{"finish_reason": "stop"}]})
    code, output = gate(run)
    assert code == 4 and "usage.completion_tokens" in output
    result = CliRunner().invoke(main, ["metrics", str(run)])
    assert result.exit_code == 4 and "usage.completion_tokens" in result.output
