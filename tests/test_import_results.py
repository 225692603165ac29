"""`layergate import-results` on outputs the real tools wrote here
(tests/fixtures/results_import/<tool>/, README in each with the command): each reader takes
the fields its tool wrote, per request, and says what the tool did not record; arms are
compared before they join (a differing setting refused with exit 2 naming it, or with
--allow a warning in every report); arms that sent the same prompts are paired, others
judged unpaired; and gate, compare, metrics and the reports take the imported runs.
(tests/test_import_results_tools.py runs the tools themselves.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.exporters import bundled
from layergate.exporters.catalogue import (
    BASELINE,
    BASELINE2,
    CANDIDATE,
    FAIL,
    IMPORT_PAIRING,
    INCONCLUSIVE,
    PAIRED,
    PASS,
    TIED,
    TOKENIZER,
    UNPAIRED,
    USAGE,
)
from layergate.harness.cli import main
from layergate.harness.gate.checks import Check, tied
from layergate.harness.results_import import (
    ResultsError,
    ResultsImportConfig,
    aiperf,
    guidellm,
    import_results,
    inference_perf,
    vllm_bench,
)
from layergate.harness.results_import.comparable import NotComparable
from layergate.harness.rundir import RunDir

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "results_import"
SOURCES = {"guidellm": FIXTURES / "guidellm" / "benchmarks.json",
           "aiperf": FIXTURES / "aiperf",
           "inference-perf": FIXTURES / "inference-perf",
           "vllm-bench": FIXTURES / "vllm-bench" / "result.json"}
# a vllm bench result without --metadata (benchmarks/peers' recording): no prompt identity
UNPAIRABLE = Path(__file__).resolve().parent / "fixtures" / "peers" / "vllm-bench" / \
    "result.json"
REQUESTS = 8  # each recording's


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    """load-tools at the recordings' size (its min_samples is 20), without the between-process
    term: the same recording imported as every arm differs by nothing at all."""
    path = tmp_path / "policy.yaml"
    base = bundled.path("scenarios", "policies", "load-tools.yaml")
    path.write_text(f"extends: {base}\nname: load-tools-small\nmin_samples: 5\n"
                    "process_spread: 0\n")
    return path


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.output


def _import(out: Path, tool: str, arm: str, source: Path | None = None, *extra: str
            ) -> tuple[int, str]:
    return _cli("import-results", source or SOURCES[tool], "--tool", tool, "--out", out,
                "--arm", arm, *extra)


# --- each reader, against the file as the tool wrote it ---------------------------------------

def test_guidellm_s_report_reads_per_request_as_guidellm_wrote_it() -> None:
    doc = json.loads(SOURCES["guidellm"].read_text())
    first = doc["benchmarks"][0]["requests"]["successful"][0]
    run = guidellm.read(SOURCES["guidellm"])
    assert len(run.requests) == REQUESTS and all(r.ok for r in run.requests)
    got = run.requests[0]
    assert got.ttft_s == pytest.approx(first["time_to_first_token_ms"] / 1000, rel=1e-12)
    assert got.e2e_s == pytest.approx(first["request_latency"], rel=1e-12)
    assert got.output_text == first["output"] and got.output_tokens == first["output_tokens"]
    assert got.itl_s == ()  # GuideLLM keeps no gaps, and none are made up
    timings = first["info"]["timings"]
    assert got.send_lag_s == pytest.approx(timings["request_start"] - timings["targeted_start"])
    assert run.version == "0.8.1" and run.settings["max_tokens"] == "8"
    assert run.settings["ignore_eos"] == "true" and "ITL" in " ".join(run.not_recorded)


def test_aiperf_s_records_read_with_their_prompts_and_answers() -> None:
    records = [json.loads(line) for line in
               (SOURCES["aiperf"] / "profile_export.jsonl").read_text().splitlines()]
    run = aiperf.read(SOURCES["aiperf"])
    assert len(run.requests) == REQUESTS == len(records)
    got, first = run.requests[0], records[0]["metrics"]
    assert first["time_to_first_token"]["unit"] == "ms"
    assert got.ttft_s == pytest.approx(first["time_to_first_token"]["value"] / 1000)
    assert got.e2e_s == pytest.approx(first["request_latency"]["value"] / 1000)
    assert got.itl_s == pytest.approx([v / 1000 for v in first["inter_chunk_latency"]["value"]])
    assert got.output_tokens == first["output_sequence_length"]["value"]
    assert got.output_text and run.prompts_from == "text"  # inputs.json, outputs.json
    assert got.tokens_from == USAGE and run.settings["token_counter"] == "server usage"
    assert run.settings["warmup"] == "none" and run.not_recorded == ()


def test_inference_perf_s_per_request_entries_read_from_their_chunk_times() -> None:
    entries = json.loads((SOURCES["inference-perf"] /
                          "per_request_lifecycle_metrics.json").read_text())
    run = inference_perf.read(SOURCES["inference-perf"])
    assert len(run.requests) == len(entries) == REQUESTS
    got, first = run.requests[0], entries[0]
    chunks = first["info"]["response_metrics"]["chunk_times"]
    assert got.ttft_s == pytest.approx(chunks[0] - first["start_time"])
    assert got.e2e_s == pytest.approx(first["end_time"] - first["start_time"])
    assert len(got.itl_s) == len(chunks) - 1
    usage = first["info"]["response_metrics"]["server_usage"]
    assert got.output_tokens == usage["completion_tokens"] and got.tokens_from == USAGE
    assert got.output_text.split()[0] in first["response"]
    assert "send lag" in " ".join(run.not_recorded)


def test_vllm_bench_s_detailed_result_reads_with_the_settings_given_as_metadata() -> None:
    doc = json.loads(SOURCES["vllm-bench"].read_text())
    run = vllm_bench.read(SOURCES["vllm-bench"])
    assert len(run.requests) == REQUESTS
    got = run.requests[0]
    assert got.ttft_s == doc["ttfts"][0] and got.e2e_s == doc["latencies"][0]
    assert list(got.itl_s) == doc["itls"][0] and got.output_text == doc["generated_texts"][0]
    assert got.tokens_from == TOKENIZER and run.settings["token_counter"] is None
    assert run.settings["max_tokens"] == "8" and run.prompts_from.startswith("vllm-bench random")
    # the same result without --metadata: no identity for its prompts, said so
    bare = vllm_bench.read(UNPAIRABLE)
    assert bare.prompts_from == "none" and bare.settings["prompts"] is None
    assert any("seed" in line for line in bare.not_recorded)


@pytest.mark.parametrize("text", ["", "[1]", "{\"benchmarks\": [1]}"])
def test_a_file_that_is_not_the_tools_names_the_file(tmp_path: Path, text: str) -> None:
    broken = tmp_path / "benchmarks.json"
    broken.write_text(text)
    with pytest.raises(ResultsError, match=str(broken)):
        guidellm.read(broken)
    code, output = _import(tmp_path / "run", "guidellm", BASELINE, broken)
    assert code == 2 and str(broken) in output


def test_a_missing_field_names_the_field(tmp_path: Path) -> None:
    doc = json.loads(SOURCES["vllm-bench"].read_text())
    del doc["itls"]
    cut = tmp_path / "result.json"
    cut.write_text(json.dumps(doc))
    with pytest.raises(ResultsError, match="'itls'.*--save-detailed|--save-detailed.*'itls'"):
        vllm_bench.read(cut)


# --- comparability ---------------------------------------------------------------------------

def _changed_max_tokens(tmp_path: Path) -> Path:
    doc = json.loads(SOURCES["guidellm"].read_text())
    for stats in doc["benchmarks"][0]["requests"]["successful"]:
        args = json.loads(stats["request_args"])
        args["body"]["max_tokens"] = 32
        stats["request_args"] = json.dumps(args)
    changed = tmp_path / "benchmarks.json"
    changed.write_text(json.dumps(doc))
    return changed


def test_an_arm_run_differently_is_refused_naming_the_setting(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert _import(run, "guidellm", BASELINE)[0] == 0
    code, output = _import(run, "guidellm", CANDIDATE, _changed_max_tokens(tmp_path))
    assert code == 2 and "max_tokens differs: baseline '8', candidate '32'" in output
    assert list(RunDir(run).read_manifest().arms) == [BASELINE]  # nothing of it stored
    with pytest.raises(NotComparable, match="max_tokens"):
        import_results(ResultsImportConfig(tool="guidellm", source=_changed_max_tokens(tmp_path),
                                           out=run, arm=CANDIDATE))


def test_allowed_the_mismatch_is_a_warning_in_every_report(tmp_path: Path, policy: Path) -> None:
    run = tmp_path / "run"
    _import(run, "guidellm", BASELINE)
    code, output = _import(run, "guidellm", CANDIDATE, _changed_max_tokens(tmp_path), "--allow")
    assert code == 0 and "warning: max_tokens differs" in output
    reports = {k: tmp_path / f"gate.{k}" for k in ("json", "junit", "markdown", "html")}
    code, output = _cli("gate", run, "--policy", policy,
                        *(x for k, p in reports.items() for x in (f"--{k}", p)))
    assert "max_tokens differs" in output  # the terminal
    for path in reports.values():
        assert "max_tokens differs" in path.read_text(), path


# --- pairing and the verdicts ----------------------------------------------------------------

@pytest.mark.parametrize("tool", list(SOURCES))
def test_the_same_run_as_every_arm_is_paired_and_passes_tied(tool: str, tmp_path: Path,
                                                            policy: Path) -> None:
    run = tmp_path / "run"
    for arm in (BASELINE, BASELINE2, CANDIDATE):
        code, output = _import(run, tool, arm)
        assert code == 0, output
    assert f"pairing: {PAIRED}" in output
    code, output = _cli("gate", run, "--policy", policy, "--json", tmp_path / "g.json")
    gate = json.loads((tmp_path / "g.json").read_text())
    assert code == 0 and gate["verdict"] == PASS, output
    rows = gate["metrics"]
    assert f"{TIED}:" in rows["ttft_latency_ratio"]["reason"]
    assert "paired by prompt" in rows[IMPORT_PAIRING]["reason"]


def test_arms_without_known_prompts_are_judged_unpaired_and_said_so(tmp_path: Path,
                                                                    policy: Path) -> None:
    run = tmp_path / "run"
    for arm in (BASELINE, BASELINE2, CANDIDATE):
        _import(run, "vllm-bench", arm, UNPAIRABLE)
    assert RunDir(run).read_manifest().imported["pairing"] == UNPAIRED
    code, output = _cli("metrics", run, "--json", tmp_path / "m.json")
    figures = json.loads((tmp_path / "m.json").read_text())["figures"]
    ttft = next(f for f in figures if f["name"] == "ttft_latency_ratio"
                and f["arm"] == CANDIDATE and f["scenario"] == "all")
    assert ttft["detail"]["pairing"] == UNPAIRED and ttft["value"] == pytest.approx(1.0)
    assert ttft["n"] == 30 and ttft["noise_floor"] == pytest.approx(1.0)
    code, output = _cli("gate", run, "--policy", policy, "--markdown", tmp_path / "g.md")
    assert code in (0, 3) and "unpaired: the arms" in (tmp_path / "g.md").read_text()


def test_imported_runs_compare_and_rank_like_replays(tmp_path: Path, policy: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for run in (one, two):
        for arm in (BASELINE, BASELINE2, CANDIDATE):
            _import(run, "aiperf", arm)
    code, output = _cli("compare", one, two, "--policy", policy, "--json",
                        tmp_path / "c.json")
    compared = json.loads((tmp_path / "c.json").read_text())
    assert code == 0 and compared["same_traffic"] and not compared["regressions"], output
    # two candidates in one run: judged as a family, with a leaderboard
    _import(one, "aiperf", "again")
    code, output = _cli("gate", one, "--policy", policy)
    assert code == 0 and "again" in output and "candidate" in output


def test_an_arm_is_imported_once_and_never_into_a_replay(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _import(run, "inference-perf", BASELINE)
    code, output = _import(run, "inference-perf", BASELINE)
    assert code == 2 and "already imported" in output
    replay = tmp_path / "replay"
    shutil.copytree(Path(__file__).resolve().parent / "fixtures" / "recorded" / "same", replay)
    code, output = _import(replay, "inference-perf", "other")
    assert code == 2 and "a replay run" in output


def _check(low: float, high: float, status: str = PASS) -> Check:
    return Check(name="latency_ratio", scenario="all", arm=CANDIDATE, status=status,
                 reason="r", counts=True, threshold=0.05, direction="<=",
                 subtract_noise_floor=True, compared_low=low, compared_high=high)


def test_tied_is_an_excess_interval_inside_the_threshold_both_ways() -> None:
    assert f"{TIED}:" in tied(_check(-0.04, 0.03)).reason
    assert tied(_check(-0.04, 0.03)).status == PASS
    for low, high, status in ((-0.2, 0.03, PASS), (0.01, 0.06, INCONCLUSIVE),
                              (0.06, 0.2, FAIL)):
        assert TIED not in tied(_check(low, high, status)).reason
    unsubtracted = Check(name="rer", scenario="all", arm=CANDIDATE, status=PASS, reason="r",
                         counts=True, threshold=0.05, compared_low=0.0, compared_high=0.01)
    assert tied(unsubtracted) == unsubtracted



def test_a_run_with_a_request_more_still_pairs_and_other_prompts_do_not(
        tmp_path: Path) -> None:
    """GuideLLM let a 25th request of 24 through once under load: the same prompts, one
    unpaired; a run of other prompts is refused, or with --allow judged unpaired."""
    doc = json.loads(SOURCES["guidellm"].read_text())
    done = doc["benchmarks"][0]["requests"]["successful"]
    fewer = tmp_path / "fewer.json"
    fewer.write_text(json.dumps({**doc, "benchmarks": [{**doc["benchmarks"][0], "requests": {
        **doc["benchmarks"][0]["requests"], "successful": done[:-1]}}]}))
    run = tmp_path / "run"
    _import(run, "guidellm", BASELINE)
    code, output = _import(run, "guidellm", CANDIDATE, fewer)
    assert code == 0 and f"pairing: {PAIRED}" in output
    other = tmp_path / "other.json"
    for stats in done:
        args = json.loads(stats["request_args"])
        args["body"]["prompt"] = "other " + args["body"]["prompt"]
        stats["request_args"] = json.dumps(args)
    other.write_text(json.dumps(doc))
    code, output = _import(run, "guidellm", "other", other)
    assert code == 2 and "prompts differs" in output and "0% of them in common" in output
    code, output = _import(run, "guidellm", "other", other, "--allow")
    assert code == 0 and f"pairing: {UNPAIRED}" in output


def test_an_imported_run_s_figures_export_to_prometheus(tmp_path: Path, policy: Path) -> None:
    """What `metrics RUN --serve PORT` serves, read from a fresh registry."""
    from prometheus_client import CollectorRegistry

    from layergate.exporters.prometheus_export import register_run
    from layergate.harness.gate import load_policy
    from layergate.harness.gate.fixed.run_view import view_config, view_run
    from layergate.harness.rundir import load_run

    run_dir = tmp_path / "run"
    for arm in (BASELINE, BASELINE2, CANDIDATE):
        _import(run_dir, "vllm-bench", arm, UNPAIRABLE)
    run, rules = load_run(run_dir), load_policy(policy)
    view = view_run(run, rules, view_config(run, rules, {}))
    registry = CollectorRegistry()
    register_run(registry, run.manifest.id, view.figures, view.thresholds(), view.verdict)
    labels = {"run": run.manifest.id, "arm": CANDIDATE, "scenario": "all"}
    got = registry.get_sample_value("layergate_run_ttft_latency_ratio", labels)
    assert got == pytest.approx(1.0)
