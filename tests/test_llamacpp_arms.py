"""A real server layergate did not write, through the whole loop: llama.cpp's OpenAI server
(llama-cpp-python, its own venv from `make install`) on the project's GGUF, as every arm
(A, A', B) and as the candidate beside layergate's own engine: replay, determinism, metrics,
gate, the HTML report and the Prometheus export, asserting on the figures each arm could
give and the reasons for those it could not. The commands are docs/SERVERS.md's
"llama.cpp"."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from html import escape
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from layergate.exporters.catalogue import LOGPROBS, NO_USAGE, SEED_IGNORED, USAGE, arm_lacks
from layergate.exporters.traffic import TrafficRecord, read_traffic, write_traffic
from layergate.harness.processes import ManagedProcess, free_port, layergate_command
from layergate.harness.rundir import load_run
from tests.support.foreign_arms import POLICY, figures, gate, greedy_traffic, layergate, replay
from tests.support.llamacpp import SMOKE_PROMPT, check_alive, generate, start_llamacpp

pytestmark = [pytest.mark.model, pytest.mark.slow, pytest.mark.llamacpp, pytest.mark.locust]

REQUESTS = 6


@pytest.fixture(scope="session")
def llamacpp() -> Iterator[list[ManagedProcess]]:
    """Three llama.cpp servers, one thread each, shared by the tests of the session."""
    servers: list[ManagedProcess] = []
    try:
        for _ in range(3):
            servers.append(start_llamacpp())
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="module")
def traffic(tmp_path_factory) -> Path:
    return greedy_traffic(tmp_path_factory.mktemp("traffic") / "traffic.jsonl", REQUESTS, 8)


@pytest.fixture(scope="module")
def tokenizer() -> str:
    """The tokenizer.json of the engine's converted model (no torch in the harness)."""
    from layergate.reference_engine.loading import ensure_converted

    return str(ensure_converted())


def test_llamacpp_generates_a_multi_token_prompt(llamacpp) -> None:
    """The server as the suite starts it prefills a prompt of several tokens in one batch
    and answers (a native build with AMX matmuls segfaulted right here)."""
    assert len(SMOKE_PROMPT.split()) >= 4
    for server in llamacpp:
        assert generate(server, max_tokens=8).strip()
    check_alive(llamacpp)


def served(run: Path) -> dict[str, dict[str, float]]:
    """`layergate metrics RUN --serve PORT` in its own process, scraped once: gauge name ->
    arm -> value."""
    port = free_port()
    proc = subprocess.Popen(layergate_command("metrics", str(run), "--serve", str(port),
                                              "--resamples", "50"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(10)
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("scenario") == "all":
                out.setdefault(s.name, {})[s.labels["arm"]] = s.value
    return out


def test_llamacpp_as_every_arm(llamacpp, traffic, tokenizer, tmp_path) -> None:
    a, a2, b = (s.url for s in llamacpp)
    run = replay(tmp_path / "run", traffic, {"baseline": a, "baseline2": a2, "candidate": b},
                 llamacpp, "--tokenizer", tokenizer)
    loaded = load_run(run)
    assert loaded.complete and len(loaded.results) == 3 * REQUESTS
    for r in loaded.results:
        # llama-cpp-python ignores include_usage: the count is one logprobs entry per token
        assert r.ok and r.tokens_from == LOGPROBS and r.output_tokens == len(r.logprobs)
        assert NO_USAGE in r.quirks and r.token_ids is None and r.extension == {}
    # every scrape says the arm has no metrics endpoint (a 404 is no failure)
    assert len(loaded.scrapes) == 6 and not any("failed" in n for n in loaded.manifest.notes)

    # the repeat suite on the candidate: seeded, sampled prompts must repeat; no logprobs
    # asked and no tokenizer: its answers are counted in characters, flagged
    seeded = write_traffic(tmp_path / "seeded.jsonl", [
        TrafficRecord(r.id, 0.0, r.scenario, r.endpoint,
                      {**r.body, "temperature": 0.9, "seed": 11})
        for r in read_traffic(traffic).records[:3]])
    result = layergate("determinism", "--target", f"candidate={b}", "--traffic", str(seeded),
                       "--repeats", "2", "--out", str(run / "determinism"), "--no-progress")
    assert result.exit_code == 0, result.output
    repeats = load_run(run).determinism.results
    assert len(repeats) == 6 and all(r.tokens_from == "characters" for r in repeats)
    assert not any(SEED_IGNORED in r.quirks for r in repeats)  # llama.cpp honours seed

    figs = figures(run, tmp_path)
    # the same GGUF, greedy, one thread: three identical arms
    for arm in ("candidate", "baseline2"):
        assert figs[("exact_match", arm)]["value"] == 1.0
        assert figs[("token_kl", arm)]["value"] == pytest.approx(0.0, abs=1e-9)
        assert figs[("termination_accuracy", arm)]["value"] == 1.0
    assert figs[("exact_match", "candidate")]["detail"]["excess"] == 0.0
    assert figs[("first_divergence", "candidate")]["detail"]["unit"].startswith("tokens of ")
    assert figs[("rer", "candidate")]["value"] is not None  # tokens from logprobs
    assert figs[("tpot_p50", "candidate")]["value"] > 0
    assert figs[("output_determinism", "candidate")]["value"] == 1.0
    for name, lacks in (("rer_theoretical", "extension"), ("token_efficiency", "extension"),
                        ("cache_hit_delta", "metrics_endpoint")):
        f = figs[(name, "candidate")]
        assert f["status"] == "not_computable" and f["value"] is None
        assert f["reason"] == arm_lacks("candidate" if lacks == "extension" else "baseline",
                                        lacks), f["reason"]
    assert figs[("resource_determinism", "candidate")]["reason"].startswith(
        "arm 'candidate' returned no `layergate` extension")

    code, report, page = gate(run, tmp_path, POLICY)
    assert (code, report["verdict"]) == (0, "pass"), report
    assert report["metrics"]["exact_match"]["value"] == 1.0
    assert report["metrics"]["output_determinism"]["value"] == 1.0
    assert escape(arm_lacks("candidate", "extension")) in page  # rer_theoretical's reason
    # how each arm's answers were counted, and its quirks, beside the verdict
    assert report["run"]["answers"]["candidate"] == {"tokens_from": {LOGPROBS: REQUESTS},
                                                     "quirks": {NO_USAGE: REQUESTS}}
    assert f"candidate: token counts from logprobs ×{REQUESTS}; quirks no_usage ×" in page

    gauges = served(run)
    assert gauges["layergate_run_exact_match"]["candidate"] == 1.0
    assert "candidate" in gauges["layergate_run_tpot_p50"]
    # not computable: no gauge at all, never a 0
    assert "layergate_run_rer_theoretical" not in gauges
    assert "layergate_run_cache_hit_delta" not in gauges


def test_our_engine_against_llamacpp(full_engine, llamacpp, traffic, tokenizer,
                                     tmp_path) -> None:
    run = replay(tmp_path / "run", traffic,
                 {"baseline": full_engine.url, "baseline2": full_engine.url,
                  "candidate": llamacpp[2].url}, llamacpp, "--tokenizer", tokenizer)
    loaded = load_run(run)
    assert loaded.complete and all(r.ok for r in loaded.results)
    ours = [r for r in loaded.results if r.arm != "candidate"]
    theirs = [r for r in loaded.results if r.arm == "candidate"]
    assert all(r.tokens_from == USAGE and r.token_ids and r.quirks == () for r in ours)
    assert all(r.tokens_from == LOGPROBS and r.quirks == (NO_USAGE,) for r in theirs)

    figs = figures(run, tmp_path)
    # computed from what each arm returned: texts, logprobs, token counts
    exact = figs[("exact_match", "candidate")]["value"]
    assert 0.0 <= exact <= 1.0 and figs[("exact_match", "baseline2")]["value"] == 1.0
    kl = figs[("token_kl", "candidate")]
    assert kl["status"] != "not_computable" and kl["value"] >= 0
    for name in ("rer", "rer_decode", "latency_ratio", "bleu", "chrf", "first_divergence"):
        assert figs[(name, "candidate")]["value"] is not None, name
    # one unit for every pair: our ids are not compared with their re-tokenised text
    assert figs[("first_divergence", "candidate")]["detail"]["unit"].startswith("tokens of ")
    # what only our engine reports: there for baseline2, a reason for the candidate
    assert figs[("rer_theoretical", "baseline2")]["value"] == 0.0
    assert figs[("rer_theoretical", "candidate")]["reason"] == arm_lacks("candidate",
                                                                         "extension")
    assert figs[("token_efficiency", "baseline")]["value"] is not None
    assert figs[("cache_hit_delta", "candidate")]["reason"] == arm_lacks("candidate",
                                                                         "metrics_endpoint")
    code, report, _ = gate(run, tmp_path, POLICY)
    assert code == {"pass": 0, "fail": 1, "inconclusive": 3}[report["verdict"]]
    assert report["metrics"]["exact_match"]["value"] == exact
