"""The sequential gate: confidence sequences that hold under monitoring after every request
(simulated streams at the threshold), decisions on stored runs in send order, the stop
predicate agreeing with the stored run's verdict, and `gate --sequential`'s exit codes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.figures import OVERALL, latency
from layergate.exporters.figures.aligned import align
from layergate.exporters.figures.compute import compute_figures
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.figures.rer import _rer
from layergate.exporters.figures.sequential import linearised_path, t_mean_path
from layergate.exporters.figures.sequential.betting import bounded_mean_path, rejected
from layergate.exporters.figures.sequential.bound import intersected
from layergate.exporters.figures.sequential.figures import figure_path
from layergate.harness.cli import main
from layergate.harness.gate import until_decided
from layergate.harness.gate.sequential.decision import decide, error_rate_above, error_rate_within
from layergate.harness.gate.sequential.send_order import load
from layergate.harness.manifest import Manifest
from layergate.harness.rundir import RunDir
from layergate.harness.store.results import StoredResult
from tests.test_gate_cli import Shape, build_run
from tests.test_saturation import POLICY as SATURATION_POLICY
from tests.test_saturation import _gate as fixed_saturation_gate
from tests.test_saturation import _run as saturation_run

ALPHA = 0.05
STREAMS = 300
MARGIN = 0.03  # 300 streams: a true rate of 5 % exceeds 8 % with probability < 1 %


def crossing_rate(paths, truth: float, start: int = 0) -> float:
    """Share of streams whose interval, watched after every observation from `start`,
    ever excludes `truth`."""
    crossed = 0
    for low, high in paths:
        looks = np.arange(low.size) >= start
        low, high = intersected(low, high, looks)
        crossed += bool(np.any((low > truth) | (high < truth)))
    return crossed / len(paths)


def naive_paths(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A fixed-sample 95 % CI recomputed after each observation: what not to do."""
    n = np.arange(1, x.size + 1)
    mean = np.cumsum(x) / n
    sd = np.sqrt(np.maximum(np.cumsum(x * x) / n - mean**2, 0) * n / np.maximum(n - 1, 1))
    half = np.where(n > 1, 1.96 * sd / np.sqrt(n), np.inf)
    return mean - half, mean + half


def test_betting_never_crosses_a_share_at_the_threshold_more_than_alpha() -> None:
    """Termination accuracy exactly at 0.925 (the no-regression threshold), 300 requests
    watched after each one: the betting sequence rejects the truth in <= alpha of streams;
    the fixed CI watched the same way does far more often."""
    rng = np.random.default_rng(5)
    truth = 0.925
    streams = [rng.binomial(1, truth, 300).astype(float) for _ in range(STREAMS)]
    crossed = sum(bool((np.logical_or(*rejected(x, np.array([truth]), 0.0, 1.0, ALPHA))).any())
                  for x in streams) / STREAMS
    assert crossed <= ALPHA + MARGIN
    naive = crossing_rate([naive_paths(x) for x in streams], truth, start=20)
    assert naive > 2 * ALPHA


def test_betting_covers_a_paired_difference_on_minus_one_to_one() -> None:
    """Exact match's excess over the noise floor: B agreeing with A in 85 %, A' in 95 %."""
    rng = np.random.default_rng(6)
    paths = []
    for _ in range(100):
        d = rng.binomial(1, 0.85, 200) - rng.binomial(1, 0.95, 200)
        _, low, high = bounded_mean_path(d.astype(float), -1.0, 1.0, ALPHA, grid=201)
        paths.append((low, high))
    assert crossing_rate(paths, -0.10) <= ALPHA + MARGIN
    # and it does decide once the evidence is there: 200 lossless requests clear -0.10
    _, low, _ = bounded_mean_path(np.zeros(200), -1.0, 1.0, ALPHA)
    assert low[-1] > -0.10 and low[19] < -0.10


def test_t_mixture_covers_log_latency_ratios_at_the_threshold() -> None:
    """latency_ratio exactly at 1.10: per-request log ratios around log 1.1."""
    rng = np.random.default_rng(7)
    truth = np.log(1.10)
    paths = []
    for _ in range(STREAMS):
        x = truth + rng.normal(0, 0.15, 300)
        _, low, high = t_mean_path(x, ALPHA, 50)
        paths.append((low, high))
    assert crossing_rate(paths, truth, start=1) <= ALPHA + MARGIN


def test_delta_method_covers_rer_at_the_target() -> None:
    """RER exactly 0.20 as a ratio of sums of skewed latencies and varying token counts,
    watched after every request from the policy's 20: the asymptotic sequence on the log of
    the time-per-token ratio crosses in <= alpha (+ margin) of streams."""
    rng = np.random.default_rng(8)
    paths = []
    for _ in range(STREAMS):
        tokens = rng.integers(8, 200, 300).astype(float)
        per_token = rng.lognormal(np.log(0.03), 0.3, 300)
        e2e_a = per_token * tokens + rng.exponential(0.05, 300)
        noise = rng.lognormal(-0.1**2 / 2, 0.1, 300)  # mean 1
        e2e_x = 0.8 * e2e_a * noise
        cols = np.c_[e2e_a, tokens, e2e_x, tokens]
        est, low, high = linearised_path(cols, lambda *s: np.log1p(-_rer(*s)), ALPHA, 50)
        paths.append((-np.expm1(high), -np.expm1(low)))
    assert crossing_rate(paths, 0.20, start=20) <= ALPHA + MARGIN


def test_the_process_margin_keeps_a_per_run_offset_covered() -> None:
    """A/A latency with each engine process a little faster or slower for its whole run
    (log speed factors of SD 0.02, the policies' process_spread) and tight per-request
    noise: the per-request sequence alone shrinks around the offset and excludes the true
    ratio 1.0 in most streams; widened by the process margin it keeps within alpha."""
    rng = np.random.default_rng(9)
    crossed = {0.0: 0, 0.02: 0}
    for _ in range(STREAMS):
        x = rng.normal(0, np.sqrt(2) * 0.02) + rng.normal(0, 0.05, 200)
        cols = {"lat.candidate.lr_n": np.ones(200), "lat.candidate.logr": x}
        for tau in crossed:
            p = figure_path("latency_ratio", "candidate", cols, None, 20, process_spread=tau)
            low, high = intersected(p.low, p.high, p.look)
            crossed[tau] += bool(np.any((low > 1) | (high < 1)))
    assert crossed[0.0] / STREAMS > 0.5
    assert crossed[0.02] / STREAMS <= ALPHA + MARGIN


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match=r"lie in \[0.0, 1.0\]"):
        bounded_mean_path(np.array([0.5, 1.5]), 0.0, 1.0)
    with pytest.raises(ValueError, match="2-D"):
        linearised_path(np.ones(3), lambda a: a)


# --- decisions on stored runs ------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("seq")
    return {
        "good": build_run(root / "good", Shape(n=120)),
        "diverging": build_run(root / "diverging", Shape(n=120, diverge_every=2)),
        "slow": build_run(root / "slow", Shape(n=120, speed=1.3, layers=30)),
        "cache_lost": build_run(root / "cache_lost", Shape(n=120, cache_hits=(6, 3))),
        "errors": build_run(root / "errors", Shape(n=120, errors=2)),
        "interrupted": build_run(root / "interrupted", Shape(n=120, status="interrupted")),
    }


def test_a_lossless_faster_candidate_passes_before_the_end(runs) -> None:
    d = decide(runs["good"])
    assert (d.verdict, d.decided) == ("pass", True)
    assert 20 <= d.n < d.available == 120
    states = {f.name: f for f in d.figures}
    assert states["rer"].state == "pass" and states["rer"].low > 0.3
    assert states["exact_match"].decided_at <= d.n
    assert max(f.decided_at for f in d.figures if f.counts and f.state == "pass") == d.n


@pytest.mark.parametrize("run, figure", [("diverging", "exact_match"),
                                         ("slow", "latency_ratio"),
                                         ("cache_lost", "cache_hit_delta")])
def test_regressions_fail_as_soon_as_one_gating_figure_does(runs, run, figure) -> None:
    policy = "scenarios/policies/no-regression.yaml"
    d = decide(runs[run], policy)
    assert (d.verdict, d.decided) == ("fail", True)
    states = {f.name: f for f in d.figures}
    assert states[figure].state == "fail" and states[figure].decided_at == d.n
    assert d.n < 60


def test_budget_spent_is_inconclusive_and_errors_fail_closed(runs) -> None:
    d = decide(runs["good"], budget=30)
    assert (d.verdict, d.decided, d.n, d.exhausted) == ("inconclusive", False, 30, True)
    assert "budget spent" in d.reasons[-1]
    # the first request failed: above the default policy's zero limit (no error seen), so
    # the run is decided there, with or without a budget
    for budget in (120, None):
        d = decide(runs["errors"], budget=budget)
        assert (d.verdict, d.decided, d.n) == ("fail", True, 1), d.reasons
        assert any("error rate is decided above its limit" in r for r in d.reasons)
    assert decide(runs["interrupted"]).verdict == "fail"


def test_the_error_rate_is_decided_above_its_limit_only_when_its_cs_is() -> None:
    # one error among 200 at a 1 % limit: never decided (the rate may well be below)
    assert not error_rate_above(np.cumsum(np.arange(200) == 100), 0.01, 0.05).any()
    # an arm failing every request at a 20 % limit: decided within a few, and stays so
    above = error_rate_above(np.cumsum(np.ones(30)), 0.2, 0.05)
    first = int(above.argmax())
    assert above.any() and first < 5 and above[first:].all()
    # a failure rate of 50 % against a 20 % limit takes longer, but is decided
    half = error_rate_above(np.cumsum(np.arange(200) % 2), 0.2, 0.05)
    assert half.any() and 5 < int(half.argmax()) < 200


def test_a_pass_needs_the_error_rate_shown_within_its_limit(runs) -> None:
    import dataclasses

    from layergate.harness.gate.policy import load_policy

    # no error in 120 requests: the rules pass early, but against a 1 % limit the rate's
    # confidence sequence needs 680 error-free requests (on the point it passed)
    policy = load_policy("default")
    one = decide(runs["good"], dataclasses.replace(policy, default_max_error_rate=0.01))
    assert (one.verdict, one.decided) == ("inconclusive", False), one.reasons
    assert any("error_rate (candidate): 0 of 120" in r and "within the limit 1.00%" in r
               for r in one.reasons)
    # against 10 % it is shown from the 53rd request on: a pass, as under no error seen
    ten = decide(runs["good"], dataclasses.replace(policy, default_max_error_rate=0.1))
    assert (ten.verdict, ten.decided) == ("pass", True) and ten.n >= 53
    assert decide(runs["good"], policy).verdict == "pass"


def test_the_error_rate_is_shown_within_its_limit_only_when_its_cs_is() -> None:
    none = np.zeros(800)
    assert error_rate_within(none, 0.0, 0.05).all()  # no error seen
    assert not error_rate_within(np.cumsum(np.arange(10) == 4), 0.0, 0.05)[4:].any()
    within = error_rate_within(none, 0.01, 0.05)
    assert int(within.argmax()) == 679 and within[679:].all()
    # once shown it stays shown (the sequence's running intersection)
    late = error_rate_within(np.cumsum(np.arange(800) == 700), 0.01, 0.05)
    assert late[679:].all()


def test_send_order_is_the_intended_time_not_the_store_order(tmp_path) -> None:
    """Rows written in reverse, with intended times: the judged prefix follows the times,
    and stops at the first request some arm has not answered yet."""
    src = RunDir(build_run(tmp_path / "src", Shape(n=40, diverge_every=2)))
    with src.open_store(create=False) as store:
        rows = store.results()
    ids = sorted({r.request_id for r in rows})
    dst = RunDir(tmp_path / "dst")
    with dst.open_store() as store:
        for r in reversed(rows):
            if r.request_id == ids[30] and r.arm == "candidate":
                continue  # still in flight
            store.put(r, intended_at=1000.0 + ids.index(r.request_id))
    dst.write_manifest(replace(src.read_manifest(), status="running"))  # still sending
    policy = "scenarios/policies/no-regression.yaml"
    d = decide(dst.path, policy)
    assert d.available == 30
    first = decide(src.path, policy)
    assert (d.verdict, d.n) == (first.verdict, first.n) == ("fail", first.n)
    assert until_decided(policy)(dst.path) and not until_decided(policy)(
        [r for r in rows if r.request_id in ids[:first.n - 1]])


def test_stopping_live_gives_the_stored_runs_verdict(runs) -> None:
    """The stop predicate on what has arrived after each request (with the next request
    half answered) fires at the first decided request; the stored run, with everything
    sent before the stop drained in, gives the same verdict at the same request."""
    for name in ("good", "diverging", "slow"):
        with RunDir(runs[name]).open_store(create=False) as store:
            rows = store.rows()
        order = sorted({r.result.request_id for r in rows})
        stop = until_decided(None, budget=120)
        stopped_at = None
        for k in range(1, len(order)):
            arrived = [r for r in rows if r.result.request_id in order[:k]]
            arrived += [r for r in rows if r.result.request_id == order[k]][:1]
            if stop(arrived):
                stopped_at = k
                break
        assert stopped_at is not None, name
        live = decide([r for r in rows if r.result.request_id in order[:stopped_at]],
                      budget=120)
        stored = decide(runs[name], budget=120)
        assert (live.verdict, live.n) == (stored.verdict, stored.n) and live.n == stopped_at


def test_a_bad_policy_is_an_error_before_anything_is_sent(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("metrics: {rer: {threshold: high}}\n")
    with pytest.raises(ValueError, match="metrics.rer.threshold"):
        until_decided(bad)


@pytest.mark.parametrize("name", ["latency_ratio", "ttft_latency_ratio", "tpot_latency_ratio"])
def test_latency_excess_is_the_fixed_gates_widened_by_the_process_term(runs, name) -> None:
    """B/A - A'/A as the fixed gate computes it (its point estimate over every request),
    its interval widened by z x SD of the process term; the plain ratio by exp(+-margin)."""
    got = load(runs["good"])
    al = align(got.rows)
    cols = latency.columns(al, MetricsConfig())
    fixed = next(f for f in compute_figures(got.rows, config=MetricsConfig(n_resamples=100))
                 if (f.name, f.arm, f.scenario) == (name, "candidate", OVERALL))
    plain = figure_path(name, "candidate", cols, al, 20, excess=True)
    wide = figure_path(name, "candidate", cols, al, 20, excess=True, process_spread=0.02)
    assert plain.estimate[-1] == pytest.approx(fixed.detail["excess"], rel=1e-9)
    b, a2 = fixed.value, fixed.noise_floor
    margin = 1.959964 * np.sqrt(2) * 0.02
    assert wide.high[-1] - plain.high[-1] == pytest.approx(
        margin * np.sqrt(b * b + a2 * a2 - b * a2), rel=1e-4)
    assert plain.low[-1] - wide.low[-1] == pytest.approx(wide.high[-1] - plain.high[-1])
    plain = figure_path(name, "candidate", cols, al, 20)
    wide = figure_path(name, "candidate", cols, al, 20, process_spread=0.02)
    assert plain.estimate[-1] == pytest.approx(fixed.value, rel=1e-9)
    assert wide.high[-1] / plain.high[-1] == pytest.approx(np.exp(margin), rel=1e-4)


def test_ttft_and_tpot_ratios_are_gated_against_the_noise_floor(runs, tmp_path) -> None:
    policy = tmp_path / "ratios.yaml"
    policy.write_text("metrics:\n" + "".join(
        f"  {name}: {{direction: '<=', threshold: 0.10, subtract_noise_floor: true}}\n"
        for name in ("ttft_latency_ratio", "tpot_latency_ratio")))
    for run, verdict in (("good", "pass"), ("slow", "fail")):
        d = decide(runs[run], policy)
        assert (d.verdict, d.decided) == (verdict, True), d.reasons
        assert {f.name: f.state for f in d.figures} == {"ttft_latency_ratio": verdict,
                                                        "tpot_latency_ratio": verdict}


def policy_file(tmp_path: Path) -> Path:
    """tests/test_saturation.py's policy as a file."""
    path = tmp_path / "saturation.yaml"
    path.write_text("metrics:\n  latency_ratio: {threshold: 0.10, subtract_noise_floor: true}\n"
                    "  exact_match: {threshold: -0.1, subtract_noise_floor: true}\n")
    return path


def test_a_saturated_prefix_is_not_decided_on_latency(tmp_path) -> None:
    """The candidate 30 % slower fails on latency when the arms are unloaded; when they
    queue (TTFT growing through the run, by the intended send times) its latency stays
    undecided, in the fixed gate's words, and the run is not decided."""
    for queue_s, verdict in ((0.0, "fail"), (0.5, "inconclusive")):
        rows, offsets = saturation_run(n=120, queue_s=queue_s, slow=1.3)
        stored = [StoredResult(r, 1000.0 + offsets[r.request_id], 0.0, "w") for r in rows]
        d = decide(stored, SATURATION_POLICY)
        assert d.verdict == verdict, d.reasons
        latency = next(f for f in d.figures if f.name == "latency_ratio")
        if verdict == "fail":
            assert (latency.state, d.saturated) == ("fail", {})
            continue
        assert (latency.state, latency.decided_at, d.decided, d.n) == ("undecided", None,
                                                                       False, 120)
        assert sorted(d.saturated) == ["baseline", "baseline2", "candidate"]
        _, fixed = fixed_saturation_gate(rows, offsets)
        fixed_reason = next(c.reason for c in fixed.overall if c.name == "latency_ratio")
        assert latency.reason.split(" (was:")[0] == fixed_reason.split(" (was:")[0]
        assert "saturated run (" in latency.reason and "lower the replay rate" in latency.reason
        assert any("lower the replay rate" in r for r in d.reasons)
        # the command shows each queued arm and what to do
        run = RunDir(tmp_path / "queued")
        with run.open_store() as store:
            for r in stored:
                store.put(r.result, intended_at=r.intended_at)
        run.write_manifest(Manifest.new("replay", {}, dict.fromkeys(d.saturated, "http://x"),
                                        {"path": "traffic.jsonl", "sha256": "0" * 64,
                                         "count": 120}).with_status("complete", {}))
        code, out = gate(run.path, "--sequential", "--policy", policy_file(tmp_path))
        assert code == ExitCode.INCONCLUSIVE, out
        assert "saturated  ttft_growth (candidate): TTFT grew" in out


# --- the command -------------------------------------------------------------------------


def gate(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["gate", *map(str, args)])
    return result.exit_code, result.output


def test_gate_sequential_exit_codes(runs, tmp_path) -> None:
    code, out = gate(runs["good"], "--sequential")
    assert code == ExitCode.PASS, out
    assert "sequential verdict: PASS (decided after" in out
    code, out = gate(runs["slow"], "--sequential", "--policy",
                     "scenarios/policies/no-regression.yaml")
    assert code == ExitCode.FAIL, out
    code, out = gate(runs["good"], "--sequential", "--budget", 25, "--json",
                     tmp_path / "seq.json")
    assert code == ExitCode.INCONCLUSIVE, out
    assert '"verdict": "inconclusive"' in (tmp_path / "seq.json").read_text()
    code, out = gate(runs["good"], "--budget", 25)
    assert code == ExitCode.USAGE and "only with --sequential" in out
    code, out = gate(runs["good"], "--sequential", "--junit", tmp_path / "x.xml")
    assert code == ExitCode.USAGE
    code, out = gate(tmp_path / "missing", "--sequential")
    assert code == ExitCode.INFRASTRUCTURE, out


def _copied(run: Path, to: Path, config: dict, **manifest) -> RunDir:
    """A copy of `run`'s results under `to`, its manifest's config updated with `config`
    and its other fields with `manifest`: a run as `replay --until-decided` leaves it."""
    src, dst = RunDir(run), RunDir(to)
    with src.open_store(create=False) as a, dst.open_store() as b:
        for r in a.results():
            b.put(r)
    m = src.read_manifest()
    dst.write_manifest(replace(m, config={**m.config, **config}, **manifest))
    return dst


def test_a_run_replayed_until_decided_is_judged_with_its_own_budget(runs, tmp_path) -> None:
    dst = _copied(runs["good"], tmp_path / "budgeted",
                  {"until_decided": "default.yaml", "budget": 30})
    d = decide(dst.path)
    assert (d.budget, d.verdict, d.n) == (30, "inconclusive", 30)


def test_the_level_is_stated_in_words_and_json(runs, tmp_path) -> None:
    code, out = gate(runs["good"], "--sequential", "--json", tmp_path / "seq.json")
    assert code == ExitCode.PASS, out
    assert "confidence sequences at 0.95" in out
    assert json.loads((tmp_path / "seq.json").read_text())["confidence"] == 0.95
    assert decide(runs["good"], confidence=1 - 0.05 / 3).to_json()["confidence"] == \
        pytest.approx(1 - 0.05 / 3)


def test_the_margin_takes_the_runs_own_baseline2_gap() -> None:
    """A/A latency whose processes differ more than the prior says (SD 0.05 against
    tau 0.02): with the run's own A'/A gap pooled in, as the fixed gate pools it, the
    sequence excludes the true ratio 1.0 less often than on the prior alone, and it is
    never narrower."""
    rng = np.random.default_rng(4)
    crossed = {"prior": 0, "own": 0}
    for _ in range(STREAMS):
        u_a, u_a2, u_b = rng.normal(0, 0.05, 3)
        cols = {"lat.candidate.lr_n": np.ones(200),
                "lat.candidate.logr": u_b - u_a + rng.normal(0, 0.05, 200)}
        own = {**cols, "lat.baseline2.lr_n": np.ones(200),
               "lat.baseline2.logr": u_a2 - u_a + rng.normal(0, 0.05, 200)}
        widths = {}
        for label, c in (("prior", cols), ("own", own)):
            p = figure_path("latency_ratio", "candidate", c, None, 20, process_spread=0.02)
            widths[label] = (p.high - p.low)[p.look]
            low, high = intersected(p.low, p.high, p.look)
            crossed[label] += bool(np.any((low > 1) | (high < 1)))
        assert np.all(widths["own"] >= widths["prior"] - 1e-12)
    assert crossed["own"] < crossed["prior"]


def test_the_fixed_gate_warns_on_a_run_stopped_early(runs, tmp_path) -> None:
    dst = _copied(runs["good"], tmp_path / "stopped", {"until_decided": "default.yaml"},
                  stopped_early=True)
    result = CliRunner().invoke(main, ["gate", str(dst.path)])
    assert "stopped early by --until-decided" in result.output + (result.stderr or "")
    result = CliRunner().invoke(main, ["gate", str(runs["good"])])
    assert "stopped early" not in result.output
