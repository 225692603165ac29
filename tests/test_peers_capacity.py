"""The capacity section of the side-by-side (benchmarks/peers/capacity.py): the truth it holds
the tools to, the rule that turns a tool's steps into one capacity, and the readers of what
each tool's search wrote, on outputs recorded from real runs against the slot echo servers
(4 and 6 slots, 4 tokens of 0.1 s, 30 requests a step): GuideLLM's sweep
(fixtures/peers/guidellm/sweep/), `layergate capacity`'s report (fixtures/peers/layergate/),
vllm bench's sweep (fixtures/peers/vllm-bench/sweep/). No tool is needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.peers import capacity, guidellm, vllm_bench
from benchmarks.peers.common import OutputError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "peers"


def test_the_truth_is_the_md_c_capacity_at_the_slo() -> None:
    truth = capacity.truths([4, 6])
    # below c / S (10 and 15 req/s), where the queue grows without bound
    assert 7 < truth[4] < 10 and 12 < truth[6] < 15
    assert truth[6] / truth[4] == pytest.approx(1.643, abs=0.01)
    # a looser limit admits more: the truth moves with the SLO
    assert capacity.truths([4], limit_s=1.0)[4] > truth[4]


@pytest.mark.parametrize(("tried", "want"), [
    (((5, True), (7.5, True), (10, False), (12.5, False)), 7.5),
    (((5, True), (10, False), (12.5, True)), 5),  # a pass above a failure is noise
    (((5, False), (7.5, True)), None),  # the lowest failed: nothing is sustained
    (((5, True), (15, True)), 15),  # nothing failed: the highest tried (a lower bound)
    ((), None),
])
def test_the_capacity_is_the_highest_pass_below_the_lowest_failure(tried, want) -> None:
    assert capacity.highest_passing(tried) == want


def test_the_ratio_needs_a_capacity_on_both_servers() -> None:
    found = {4: capacity.Found(8.0, (), 1.0), 6: capacity.Found(12.0, (), 1.0)}
    assert capacity.ratio_of(found) == pytest.approx(1.5)
    assert capacity.ratio_of({**found, 4: capacity.Found(None, (), 1.0)}) is None


def test_guidellms_sweep_gives_each_steps_rate_and_its_own_late_warning() -> None:
    doc = guidellm.read_report(FIXTURES / "guidellm" / "sweep" / "benchmarks.json")
    steps = guidellm.sweep_rates(doc)
    assert [k for k, _, _ in steps] == ["synchronous", "throughput"] + ["poisson"] * 4
    assert [r is None for _, r, _ in steps] == [True, True, False, False, False, False]
    assert [round(r, 2) for _, r, _ in steps[2:]] == [4.12, 5.82, 7.53, 9.23]
    # the first Poisson step after the throughput one lost its schedule, and said so
    assert [late for _, _, late in steps] == [False, False, True, False, False, False]
    ttft_p90 = [guidellm.measured(doc, Path("x"), 0, 0, index=i).ttft[90] for i in range(6)]
    assert ttft_p90[2] > 2 and max(ttft_p90[3:]) < capacity.LIMIT_S


def test_layergates_capacities_and_ratio_are_read_from_its_report() -> None:
    found, ratio = capacity.read_layergate(FIXTURES / "layergate" / "capacity-report.json",
                                           4, 6, wall_s=149.0)
    assert found[4].capacity == pytest.approx(8.578, abs=1e-3)
    assert found[6].capacity == pytest.approx(14.25, abs=0.01)
    assert ratio == pytest.approx(1.661, abs=1e-3)
    assert (5.0, True) in found[4].tried and (10.0, False) in found[4].tried
    assert found[4].wall_s == 149.0


def test_a_report_that_is_not_layergates_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "capacity-report.json"
    path.write_text('{"arms": {}}')
    with pytest.raises(ValueError, match="capacity-report.json"):
        capacity.read_layergate(path, 4, 6)
    with pytest.raises(OutputError, match="no such file"):
        capacity.read_layergate(tmp_path / "absent.json", 4, 6)


def test_vllm_benchs_points_meet_the_slo_by_their_goodput_share() -> None:
    points = vllm_bench.sweep_points(FIXTURES / "vllm-bench" / "sweep" / "slo")
    # 4/s: 3.32 of 3.69 req/s met it (18 of 20, exactly 0.9); 16/s: all of 11.95
    assert capacity.met_goodput(points) == ((4.0, True), (16.0, True))
    strict = [vllm_bench.SweepPoint(8.0, 3.0, 4.0, 20, 0, Path("x")),
              vllm_bench.SweepPoint(9.0, 0.0, 0.0, 0, 20, Path("y"))]
    assert capacity.met_goodput(strict) == ((8.0, False), (9.0, False))


def test_every_tool_has_its_rule_said() -> None:
    from benchmarks.peers.errors import ADAPTERS
    assert set(capacity.RULES) == set(ADAPTERS)
    assert set(capacity.PEERS) == set(ADAPTERS) - {"layergate"}


def test_inference_perfs_stages_give_their_rate_and_goodput_share(tmp_path: Path) -> None:
    from benchmarks.peers import inference_perf
    stages = inference_perf.stage_goodputs(FIXTURES / "inference-perf" / "sweep")
    assert [(g.stage, g.requested_rate, g.good, g.total) for g in stages] == [
        (0, 1.0, 5, 5), (1, 5.3, 26, 26), (2, 9.61, 36, 48), (3, 13.91, 13, 69)]
    tried = tuple((g.requested_rate, g.share >= capacity.ATTAINMENT) for g in stages)
    assert capacity.highest_passing(tried) == 5.3
    with pytest.raises(OutputError, match="no stage_"):
        inference_perf.stage_goodputs(tmp_path)
    (tmp_path / "stage_0_lifecycle_metrics.json").write_text('{"successes": {"count": 1}}')
    with pytest.raises(OutputError, match="stage_0_lifecycle_metrics.json: no goodput"):
        inference_perf.stage_goodputs(tmp_path)
