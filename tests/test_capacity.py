"""Capacity at the SLO, the judge side and the ladder, without servers: the SLO parser,
the pass rule, the interpolation and the paired interval, and a whole sweep against
simulated slot servers (M/D/c queues) whose capacity is known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.exporters.catalogue import BASELINE, BASELINE2, CANDIDATE, FIGURES
from layergate.exporters.figures import Figure
from layergate.exporters.figures import capacity as cap
from layergate.exporters.figures.capacity_step import StepArm
from layergate.exporters.figures.slo import SLO, SLOError, parse_slo
from layergate.exporters.records import ArmResult
from layergate.harness.capacity.config import CapacityConfig, sweep_arms
from layergate.harness.capacity.ladder import DONE_BRACKETED, DONE_NONE, next_step, propose
from layergate.harness.capacity.report import build_report
from layergate.harness.capacity.sweep import step_size
from layergate.harness.cli import main
from layergate.harness.report.capacity_plots import FRONTIER, write_frontier
from layergate.harness.sweepdir import Step, SweepState
from tests.support.slots import simulated_step, true_capacity

TOKEN_S, TOKENS = 0.2, 4  # the slot servers: 0.8 s a request
SLO_TTFT = 1.0  # s: a request may wait 0.8 s for a slot


def test_the_slo_parses_with_units_and_names_what_is_wrong() -> None:
    assert parse_slo("ttft:2s,tpot:150ms") == SLO(ttft_s=2.0, tpot_s=0.15)
    assert parse_slo("e2e:1.5") == SLO(e2e_s=1.5)
    assert parse_slo("ttft:2s,tpot:150ms").text() == "ttft:2s,tpot:150ms"
    for bad, words in (("ttfb:2s", "unknown key 'ttfb'"), ("ttft:0s", "must be > 0"),
                       ("tpot:-5ms", "must be > 0"), ("ttft:2h", "not a duration"),
                       ("ttft", "expected KEY:LIMIT"), ("", "limits nothing"),
                       ("ttft:1s,ttft:2s", "given twice")):
        with pytest.raises(SLOError, match=words):
            parse_slo(bad)


def _result(rid: str, ok: bool = True, ttft: float = 0.1, e2e: float = 1.0,
            tokens: int = 10, arm: str = BASELINE) -> ArmResult:
    return ArmResult(rid, arm, "s", ok, ttft_s=ttft, e2e_s=e2e, output_tokens=tokens)


def test_a_request_meets_the_slo_when_it_succeeded_within_every_limit() -> None:
    slo = parse_slo("ttft:200ms,tpot:100ms")
    assert slo.meets(_result("a"))  # TPOT 0.1 s: the limit itself holds
    assert not slo.meets(_result("a", ttft=0.3))
    assert not slo.meets(_result("a", e2e=2.0))
    assert not slo.meets(_result("a", ok=False))
    assert slo.meets(_result("a", tokens=1))  # TPOT undefined: judged on TTFT


def _steps(arm: str, points: list[tuple[float, float]], n: int = 100) -> list[StepArm]:
    return [StepArm(arm, load, tuple(i < round(att * n) for i in range(n)), 0, n / load)
            for load, att in points]


def test_capacity_interpolates_between_the_last_pass_and_the_first_failure() -> None:
    steps = _steps(BASELINE, [(2, 1.0), (4, 0.99), (8, 0.5), (6, 0.91)])
    c = cap.capacity(steps, 0.95, 0.01)
    assert (c.bound, c.last_pass, c.first_fail) == (cap.EXACT, 4, 6)
    assert c.value == pytest.approx(4 + 2 * (0.99 - 0.95) / (0.99 - 0.91))
    assert cap.capacity(_steps(BASELINE, [(2, 1.0), (4, 1.0)]), 0.95, 0.01).bound == \
        cap.AT_LEAST
    none = cap.capacity(_steps(BASELINE, [(2, 0.5)]), 0.95, 0.01)
    assert (none.bound, none.value) == (cap.NONE, None)
    assert "none" in none.text()
    # a failure on errors, not on the SLO: the capacity stays at the last pass
    erring = [*_steps(BASELINE, [(2, 1.0)]),
              StepArm(BASELINE, 4, (True,) * 100, errors=5, window_s=25)]
    assert cap.capacity(erring, 0.95, 0.01).value == 2


def test_the_ratio_of_a_bound_is_not_computable() -> None:
    steps = [*_steps(BASELINE, [(2, 1.0), (4, 0.5)]),
             *_steps(CANDIDATE, [(2, 1.0), (4, 1.0)])]
    ratio = _one(cap.figures(steps, cap.SweepRule(resamples=50), "req/s"), "capacity_ratio",
                 CANDIDATE)
    assert ratio.status == "not_computable" and "lower bound" in ratio.reason


def _one(figures: list[Figure], name: str, arm: str) -> Figure:
    return next(f for f in figures if f.name == name and f.arm == arm)


def _config(**kw) -> CapacityConfig:
    base = dict(out=Path("x"), arms={BASELINE: "http://a", CANDIDATE: "http://b"},
                traffic=Path("t.jsonl"), slo=f"ttft:{SLO_TTFT}s")
    return CapacityConfig(**{**base, **kw})


def test_the_ladder_is_geometric_then_bisects_and_an_arm_that_failed_stops() -> None:
    config = _config(start=2, factor=2, bisections=2)
    assert propose([], config).load == 2
    assert propose([(2, True)], config).load == 4
    assert propose([(2, True), (4, False)], config).load == pytest.approx(2.828)
    assert propose([(2, True), (4, False), (2.828, True), (3.364, True)],
                   config).why == DONE_BRACKETED
    assert propose([(2, False)], config).why == DONE_NONE
    load, arms, done = next_step({BASELINE: [(2, True), (4, False)],
                                  CANDIDATE: [(2, True), (4, True)]}, config)
    assert (load, arms, done) == (2.828, (BASELINE,), {})
    users = _config(load="users", start=4, factor=2)
    assert propose([(4, True), (8, False)], users).load == 6
    assert propose([(4, True), (8, False)], _config(load="users", bisections=0)).why == \
        DONE_BRACKETED
    assert propose([(4, True), (5, False)], users).why == DONE_BRACKETED
    assert propose([(4, True)], _config(start=4, max_load=6)).load == 6


def _simulated_sweep(slots: dict[str, int], config: CapacityConfig) -> list[StepArm]:
    """The sweep's ladder and judge on ideal slot servers (tests/support/slots.py)."""
    state, out = SweepState({}), []
    while True:
        outcomes = {arm: [(s.load, s.passes(config.slo_attainment, config.max_error_rate))
                          for s in out if s.arm == arm] for arm in slots}
        load, arms, _ = next_step(outcomes, config)
        if load is None:
            return out
        n = step_size(config, load, state)
        step = [simulated_step(arm, load, n, slots[arm], TOKEN_S, TOKENS, config.parsed_slo,
                               config.warmup, config.seed) for arm in arms]
        out += step
        state.steps.append(Step(len(state.steps), load, arms, n, 0.0, tuple(step)))


def test_a_simulated_sweep_finds_the_known_ratio_and_its_noise_floor() -> None:
    config = _config(start=2, factor=2, bisections=3, warmup=10, min_duration=120,
                     min_requests=200, arms={BASELINE: "http://a", BASELINE2: "http://c",
                                             CANDIDATE: "http://b"})
    steps = _simulated_sweep({BASELINE: 4, BASELINE2: 4, CANDIDATE: 6}, config)
    figures = cap.figures(steps, cap.SweepRule(resamples=300), config.unit)
    true = (true_capacity(6, TOKEN_S * TOKENS, SLO_TTFT - TOKEN_S)
            / true_capacity(4, TOKEN_S * TOKENS, SLO_TTFT - TOKEN_S))
    assert 1.6 < true < 1.8  # more than 6 / 4: more slots queue less at the same load
    ratio = _one(figures, "capacity_ratio", CANDIDATE)
    assert ratio.value == pytest.approx(true, rel=0.10)
    assert ratio.ci_low <= true <= ratio.ci_high
    floor = _one(figures, "capacity_ratio", BASELINE2)
    assert floor.ci_low <= 1 <= floor.ci_high and floor.value == 1.0
    assert ratio.noise_floor == 1.0 and ratio.detail["excess"] == pytest.approx(
        ratio.value - 1)
    assert {f.name for f in figures} == {n for n, s in FIGURES.items() if s.sweep} - {
        "capacity_realisation"}  # the slot servers report no theoretical saving


def test_the_realised_gain_is_read_against_the_theoretical_saving() -> None:
    steps = [*_steps(BASELINE, [(2, 1.0), (4, 0.5)]),
             *[StepArm(CANDIDATE, s.load, s.met, 0, s.window_s, theoretical=0.5)
               for s in _steps(CANDIDATE, [(2, 1.0), (4, 1.0), (6, 0.5)])]]
    figures = cap.figures(steps, cap.SweepRule(resamples=50), "req/s")
    ratio, real = (_one(figures, name, CANDIDATE)
                   for name in ("capacity_ratio", "capacity_realisation"))
    assert real.detail["theoretical_ratio"] == 2.0  # half the compute: twice the speed
    assert real.value == pytest.approx((ratio.value - 1) / 1.0)


def test_a_closed_loop_step_is_sized_from_the_rate_users_carried() -> None:
    config = _config(load="users", start=4, warmup=1, min_duration=5, min_requests=10)
    state = SweepState({})
    assert step_size(config, 4, state) == 10 + 8  # nothing carried yet: a guess
    state.steps.append(Step(0, 4, (BASELINE,), 40, 10, (StepArm(BASELINE, 4, (True,) * 40,
                                                                 0, 10.0),)))
    assert step_size(config, 8, state) == math.ceil(8 * 1) + 8 * 5  # 1 req/s per user


@pytest.mark.parametrize(("args", "words"), [
    (["--slo", "ttfb:2s"], "unknown key 'ttfb'"),
    (["--slo", "ttft:0ms"], "must be > 0"),
    (["--slo", "ttft:2s", "--load", "users", "--start", "2.5"], "whole"),
    ([], "limits nothing"),
])
def test_bad_input_is_a_usage_error(tmp_path: Path, args: list[str], words: str) -> None:
    traffic = tmp_path / "t.jsonl"
    traffic.write_text('{"id": "a", "offset_s": 0, "body": {"prompt": "x"}}\n')
    result = CliRunner().invoke(main, ["capacity", "--traffic", str(traffic), "--baseline",
                                       "http://127.0.0.1:9", "--candidate",
                                       "http://127.0.0.1:9", "--out", str(tmp_path / "o"),
                                       *args])
    assert result.exit_code == 2, result.output
    assert words in result.output


def _sweep_dir(tmp_path: Path, status: str) -> Path:
    """A stored sweep: the baseline and baseline2 carry about 4 req/s, the candidate 8."""
    from layergate.harness.sweepdir import SweepDir

    config = _config(out=tmp_path / "sweep", arms={BASELINE: "http://a", BASELINE2: "http://c",
                                                   CANDIDATE: "http://b"})
    steps = [*_steps(BASELINE, [(2, 1.0), (4, 0.96), (5, 0.6)]),
             *_steps(BASELINE2, [(2, 1.0), (4, 0.97), (5, 0.5)]),
             *_steps(CANDIDATE, [(2, 1.0), (4, 1.0), (8, 0.96), (10, 0.4)])]
    state = SweepState(config.to_json(), status=status)
    for i, load in enumerate(sorted({s.load for s in steps})):
        at = tuple(s for s in steps if s.load == load)
        state.steps.append(Step(i, load, tuple(s.arm for s in at), 100, 1.0, at))
    sweep = SweepDir(config.out)
    sweep.write(state)
    sweep.write_json(sweep.report_path, build_report(state, config))
    return config.out


# a complete single sweep: shown, never judged on its own interval (inconclusive, saying
# what covers); an interrupted one fails closed
@pytest.mark.parametrize(("status", "code", "verdict"), [("complete", 3, "inconclusive"),
                                                         ("interrupted", 1, "fail")])
def test_gate_judges_a_capacity_sweep_under_a_policy(tmp_path: Path, status: str, code: int,
                                                     verdict: str) -> None:
    out = _sweep_dir(tmp_path, status)
    report = tmp_path / "gate.json"
    html = tmp_path / "gate.html"
    result = CliRunner().invoke(main, ["gate", str(out), "--policy", "capacity", "--json",
                                       str(report), "--html", str(html)])
    assert result.exit_code == code, result.output
    gate = json.loads(report.read_text())
    assert gate["verdict"] == verdict
    ratio = gate["metrics"]["capacity_ratio"]
    assert ratio["value"] > 1.9 and ratio["noise_floor"] is not None
    if status == "complete":  # judged on the sweep's completeness alone when interrupted
        assert ratio["status"] == "inconclusive"
        assert "sampling noise only" in ratio["reason"] and "--replicates 8 --restart" in \
            ratio["reason"]
    page = html.read_text()
    assert "no verdict rests on it; rerun with --replicates 8 --restart CMD" in page or \
        status != "complete"
    for stem in FRONTIER:  # the SLO frontier: goodput, TTFT and TPOT against the load
        assert f'id="plot-{stem}"><img' in page


def test_a_single_sweeps_interval_is_labelled_where_it_is_stored_and_printed(
        tmp_path: Path) -> None:
    from layergate.harness.capacity.report import (
        SINGLE_SWEEP,
        SINGLE_SWEEP_NOTE,
        print_sweep,
        sweep_figures,
    )
    from layergate.harness.sweepdir import SweepDir

    out = _sweep_dir(tmp_path, "complete")
    report = json.loads((out / "capacity-report.json").read_text())
    assert report["ratio_interval"] == SINGLE_SWEEP_NOTE
    ratio = next(f for f in report["figures"]
                 if f["name"] == "capacity_ratio" and f["arm"] == CANDIDATE)
    assert ratio["ci_low"] is not None and ratio["detail"]["interval"] == SINGLE_SWEEP
    lines: list[str] = []
    state = SweepDir(out).read()
    print_sweep(sweep_figures(state, _config(out=out)), state, _config(out=out),
                lambda line, err=False: lines.append(line))
    at = next(i for i, x in enumerate(lines) if x.startswith("capacity ratio candidate"))
    assert "--replicates 8 --restart CMD" in lines[at + 1]


def test_the_frontier_pngs_draw_every_arm(tmp_path: Path) -> None:
    out = _sweep_dir(tmp_path, "complete")
    report = json.loads((out / "capacity-report.json").read_text())
    written = write_frontier(report, tmp_path)
    assert [p.name for p in written] == [f"{stem}.png" for stem in FRONTIER]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in written)
    assert report["arms"][CANDIDATE]["capacity"] == pytest.approx(8 + 2 * 0.01 / 0.56)


def test_each_step_and_the_capacity_are_served_to_prometheus(tmp_path: Path) -> None:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    from layergate.harness.capacity.live import SweepMetrics
    from layergate.harness.capacity.report import sweep_figures
    from layergate.harness.processes import free_port
    from layergate.harness.sweepdir import SweepDir

    out = _sweep_dir(tmp_path, "complete")
    state = SweepDir(out).read()
    port = free_port()
    live = SweepMetrics(port, "127.0.0.1", "sweep", 0.95, 0.01)
    try:
        live.update(state.steps, sweep_figures(state, _config(out=out)))
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        live.close()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    step = (("arm", CANDIDATE), ("run", "sweep"), ("step", "3"))  # 8 req/s: the candidate only
    assert samples[("layergate_capacity_step_load", step)] == 8
    assert samples[("layergate_capacity_step_slo_attainment", step)] == 0.96
    assert samples[("layergate_capacity_step_passed", step)] == 1
    assert ("layergate_capacity_step_passed", (("arm", BASELINE), ("run", "sweep"),
                                               ("step", "3"))) not in samples
    overall = (("arm", CANDIDATE), ("run", "sweep"), ("scenario", "all"))
    assert samples[("layergate_run_capacity_ratio", overall)] > 1.9


LEADERBOARD_POLICY = """\
name: leaderboard-test
max_error_rate: 0.05
min_samples: 10
metrics:
  rer: {direction: ">=", threshold: 0.0}
"""


def test_a_candidates_capacity_sweep_is_its_saving_on_the_leaderboard(tmp_path: Path) -> None:
    """Two candidates answering alike (RER about 0.2); one has a capacity sweep (ratio about
    2): its saving is 1 - 1/ratio with the sweep's interval, labelled so, and it ranks first."""
    from tests.support.synthetic_run import write_run

    sweep = _sweep_dir(tmp_path, "complete")
    # 200 requests: enough for the errors the synthetic arms draw (0.5 %) to show the 5 % limit
    run = write_run(tmp_path / "run", 200, candidates=("timed", "swept")).path
    policy = tmp_path / "policy.yaml"
    policy.write_text(LEADERBOARD_POLICY)
    out = {k: tmp_path / f"gate.{k}" for k in ("json", "markdown", "html")}
    result = CliRunner().invoke(main, [
        "gate", str(run), "--policy", str(policy), "--capacity", f"swept={sweep}",
        *(x for k, p in out.items() for x in (f"--{k}", str(p)))])
    assert result.exit_code == 0, result.output
    board = {row["name"]: row for row in json.loads(out["json"].read_text())["leaderboard"]}
    ratio = json.loads((sweep / "capacity-report.json").read_text())
    ratio = next(f for f in ratio["figures"] if f["name"] == "capacity_ratio"
                 and f["arm"] == CANDIDATE)
    swept, timed = board["swept"]["saving"], board["timed"]["saving"]
    assert swept["source"] == "capacity_ratio" and swept["measured"] == {
        "value": ratio["value"], "ci_low": ratio["ci_low"], "ci_high": ratio["ci_high"]}
    assert swept["value"] == pytest.approx(1 - 1 / ratio["value"])
    assert swept["ci_low"] == pytest.approx(1 - 1 / ratio["ci_low"]) and \
        swept["ci_low"] < swept["value"]
    assert timed["source"] == "rer" and timed["value"] == board["timed"]["rer"]["value"] \
        < swept["value"]
    assert list(board) == ["swept", "timed"] and board["swept"]["recommended"]
    assert f"(capacity ×{ratio['value']:.3g}" in out["markdown"].read_text()
    assert "capacity" in result.output and "id=plot-leaderboard><img" in out["html"].read_text()
    # the synthetic sweep ran against another baseline URL than the run: said, not refused
    assert "the sweep's baseline (http://a) is not the run's" in result.output
    unknown = CliRunner().invoke(main, ["gate", str(run), "--capacity", f"swep={sweep}"])
    assert unknown.exit_code == 2 and "did you mean 'swept'" in unknown.output, unknown.output
    not_a_sweep = CliRunner().invoke(main, ["gate", str(run), "--capacity", f"swept={run}"])
    assert not_a_sweep.exit_code == 4 and "not a capacity sweep" in not_a_sweep.output


def test_the_sweep_prints_each_arm_s_capacity_and_the_ratios(tmp_path: Path) -> None:
    from layergate.harness.capacity.report import print_sweep, sweep_figures
    from layergate.harness.sweepdir import SweepDir

    out = _sweep_dir(tmp_path, "complete")
    state, config = SweepDir(out).read(), _config(out=out)
    lines: list[tuple[str, bool]] = []
    print_sweep(sweep_figures(state, config), state, config,
                echo=lambda line, err=False: lines.append((line, err)))
    text = [line for line, _ in lines]
    assert text[0].startswith(f"complete: {out} (SLO ttft:1s, attainment >= 0.95; 5 steps")
    assert [line.split(":")[0] for line in text[1:4]] == [
        f"capacity {arm}" for arm in (BASELINE, BASELINE2, CANDIDATE)]
    at = next(i for i, line in enumerate(text)
              if line.startswith(f"capacity ratio {CANDIDATE} / baseline: 1.99"))
    assert "noise floor" in text[at]
    # one sweep's interval is said to be its sampling noise, with the command that covers
    assert "sampling noise" in text[at + 1] and "--replicates 8 --restart CMD" in text[at + 1]


def test_an_unbounded_interval_end_prints_as_infinity(tmp_path: Path) -> None:
    # a baseline that never failed in some resamples has no upper end (+∞): the sweep that
    # measured it must still print, not crash on the missing end
    from layergate.exporters.catalogue import CAPACITY, CAPACITY_RATIO
    from layergate.harness.capacity.report import print_sweep
    from layergate.harness.sweepdir import SweepDir

    out = _sweep_dir(tmp_path, "complete")
    state, config = SweepDir(out).read(), _config(out=out)
    figures = [Figure(CAPACITY, 4.4, arm=CANDIDATE, ci_low=4.213, ci_high=None,
                      detail={"text": "4.4 users"}),
               Figure(CAPACITY_RATIO, 1.4, arm=CANDIDATE, ci_low=None, ci_high=None),
               Figure(CAPACITY_RATIO, 1.2, arm=BASELINE2, ci_low=0.9, ci_high=None)]
    lines: list[str] = []
    print_sweep(figures, state, config, echo=lambda line, err=False: lines.append(line))
    assert "capacity candidate: 4.4 users [4.213, ∞]" in lines
    assert f"capacity ratio {CANDIDATE} / baseline: 1.400" in lines
    assert f"capacity ratio {BASELINE2} / baseline: 1.200 [0.900, ∞]" in lines


def test_a_sweep_takes_one_candidate_whatever_its_name() -> None:
    arms = {BASELINE: "http://a", "fast": "http://f"}
    assert sweep_arms(arms, {"fast": "m"}) == ({BASELINE: "http://a", CANDIDATE: "http://f"},
                                               {CANDIDATE: "m"})
    with pytest.raises(ValueError, match="takes one candidate, got 2: fast, slow"):
        sweep_arms({**arms, "slow": "http://s"}, {})
    got = CliRunner().invoke(main, ["capacity", "--scenario", "smoke", "--baseline",
                                    "http://a", "--candidate", "fast=http://f", "--candidate",
                                    "slow=http://s", "--out", "sweep", "--slo", "ttft:1s"])
    assert got.exit_code == 2 and "--candidate: a capacity sweep takes one candidate" in \
        got.output
