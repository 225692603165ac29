"""`layergate metrics`: the table, JSON, errors, serving to a real Prometheus, and a real
run directory from the replayer against a real engine, end to end."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest
from click.testing import CliRunner

from layergate.exporters.records import ArmResult
from layergate.exporters.traffic import TrafficRecord, write_traffic
from layergate.harness.cli import main
from layergate.harness.manifest import Manifest
from layergate.harness.processes import ManagedProcess, free_port, layergate_command
from layergate.harness.rundir import RunDir, load_run
from layergate.harness.stack.processes import ProcessSet
from layergate.harness.stack.prometheus import start_prometheus
from layergate.harness.stack.prometheus_config import ScrapeTargets

pytestmark = [pytest.mark.locust, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "scenarios" / "policies" / "default.yaml"


def _cache_scrape(hits: int, queries: int) -> str:
    return ("# TYPE layergate_prefix_cache_hits_total counter\n"
            f'layergate_prefix_cache_hits_total{{policy="full"}} {hits}\n'
            "# TYPE layergate_prefix_cache_queries_total counter\n"
            f'layergate_prefix_cache_queries_total{{policy="full"}} {queries}\n')


def _run_dir(tmp_path: Path, n: int = 30) -> Path:
    """A run directory written with the replayer's own store and manifest writers."""
    run = tmp_path / "run"
    records = [TrafficRecord(f"r{i}", i * 0.1, "short" if i % 3 else "long",
                             "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": f"q{i}"}],
                              "max_tokens": 8},
                             # every 5th request carries the response recorded in production
                             {"choices": [{"finish_reason": "length",
                                           "message": {"content": "x"}}],
                              "usage": {"completion_tokens": 8}} if i % 5 == 0 else None)
               for i in range(n)]
    run_dir = RunDir(run)
    run_dir.write_traffic(records)
    with run_dir.open_store() as store:
        for i, rec in enumerate(records):
            for arm, scale, same in (("baseline", 1.0, True), ("baseline2", 1.02, True),
                                     ("candidate", 0.75, i % 4 != 0)):
                ids = (1, 2, 3, 4, 5, 6, 7, 8) if same else (1, 2, 3, 9, 9, 9, 9, 9)
                store.put(ArmResult(rec.id, arm, rec.scenario, True, http_status=200,
                                    ttft_s=0.05 * scale, e2e_s=(0.4 + i / 200) * scale,
                                    itl_s=(0.05 * scale,) * 7, output_text=" ".join(map(str, ids)),
                                    output_tokens=8, prompt_tokens=12, finish_reason="length",
                                    max_tokens=8, token_ids=ids,
                                    extension={"theoretical_saving": 0.3 if scale < 1 else 0.0,
                                               "computed_tokens": 19, "peak_memory_bytes": 1000}))
    arms = {"baseline": "http://a", "baseline2": "http://b", "candidate": "http://c"}
    manifest = Manifest.new("replay", {"rate": 1.0}, arms,
                            {"path": "traffic.jsonl", "sha256": "x", "count": n})
    run_dir.write_manifest(manifest.with_status("complete", {a: {"ok": n, "error": 0}
                                                             for a in arms}))
    for arm, (hits, queries) in (("baseline", (50, 100)), ("baseline2", (50, 100)),
                                 ("candidate", (40, 100))):
        run_dir.write_scrape(arm, "before", _cache_scrape(0, 0))
        run_dir.write_scrape(arm, "after", _cache_scrape(hits, queries))
    return run


def _figure(doc: dict, name: str, arm: str = "candidate", scenario: str = "all") -> dict:
    return next(f for f in doc["figures"]
                if (f["name"], f["arm"], f["scenario"]) == (name, arm, scenario))


def test_table_and_json(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    out = tmp_path / "figures.json"
    result = CliRunner().invoke(main, ["metrics", str(run), "--json", str(out),
                                       "--resamples", "200"])
    assert result.exit_code == 0, result.output
    assert "rer" in result.output and "per scenario" in result.output
    doc = json.loads(out.read_text())
    assert doc["run"]["status"] == "complete" and doc["verdict"] is None
    rer = _figure(doc, "rer")
    assert rer["value"] == pytest.approx(0.25) and rer["ci_low"] <= 0.25 <= rer["ci_high"]
    assert rer["noise_floor"] == pytest.approx(1 - 1.02)
    em = _figure(doc, "exact_match")
    assert em["value"] == pytest.approx(22 / 30) and em["noise_floor"] == 1.0
    assert em["detail"]["excess"] == pytest.approx(22 / 30 - 1)
    assert _figure(doc, "cache_hit_delta")["value"] == pytest.approx(0.2)
    ta = _figure(doc, "termination_accuracy")
    assert ta["value"] == 1.0 and ta["n"] == 30 and ta["detail"]["oracle"] == "baseline"
    # the recorded responses (every 5th) have their own figure: all end on the length limit
    rec = _figure(doc, "termination_accuracy_recorded")
    assert rec["value"] == 1.0 and rec["n"] == 6 and rec["detail"]["recorded_requests"] == 6
    assert rec["noise_floor"] == 1.0 and rec["status"] == "insufficient"
    assert _figure(doc, "termination_accuracy_recorded", arm="baseline")["value"] == 1.0
    assert {f["scenario"] for f in doc["figures"]} == {"all", "short", "long"}
    assert _figure(doc, "token_efficiency", arm="baseline")["value"] == 1.0  # 12 + 7 of 19


def test_policy_adds_the_gate_s_verdict_and_target(tmp_path: Path) -> None:
    run, out, policy = _run_dir(tmp_path), tmp_path / "figures.json", tmp_path / "p.yaml"
    policy.write_text(f"extends: {POLICY}\ntarget_rer: 0.4\n")
    result = CliRunner().invoke(main, ["metrics", str(run), "--json", str(out),
                                       "--policy", str(policy), "--resamples", "100"])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    # exact match 22/30 against a noise floor of 1.0 (excess -0.27, past the -0.10 allowed),
    # cache-hit delta 0.2 and RER 0.25 under the policy's target of 0.4: the gate fails it,
    # and says the same
    assert doc["verdict"] == "fail"
    assert _figure(doc, "rrr")["detail"]["target_rer"] == 0.4  # the policy's, not 0.20
    gate = CliRunner().invoke(main, ["gate", str(run), "--policy", str(policy)])
    assert gate.exit_code == 1, gate.output
    assert "exact_match: excess over noise floor" in gate.output and ">= 0.4" in gate.output
    given = CliRunner().invoke(main, ["metrics", str(run), "--json", str(out), "--policy",
                                      str(policy), "--target-rer", "0.1", "--resamples", "100"])
    assert given.exit_code == 0, given.output
    assert _figure(json.loads(out.read_text()), "rrr")["detail"]["target_rer"] == 0.1


def test_errors_have_meaningful_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(main, ["metrics", str(tmp_path / "nope")])
    assert missing.exit_code == 4 and "no such run directory" in missing.output
    bad_policy = tmp_path / "bad.yaml"
    bad_policy.write_text("metrics: 3\n")
    result = runner.invoke(main, ["metrics", str(_run_dir(tmp_path)), "--policy",
                                  str(bad_policy)])
    assert result.exit_code == 2 and f"{bad_policy}: metrics" in result.stderr, result.output
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = runner.invoke(main, ["metrics", str(tmp_path / "run"), "--resamples", "20",
                                      "--serve", str(busy.getsockname()[1])])
    assert result.exit_code == 2 and "cannot listen" in result.output


class _OtlpReceiver(BaseHTTPRequestHandler):
    paths: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).paths.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_otlp_endpoint_from_the_environment(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OtlpReceiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_port}"
        result = CliRunner().invoke(main, ["metrics", str(_run_dir(tmp_path)), "--resamples",
                                           "50"], env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint})
    finally:
        server.shutdown()
    assert result.exit_code == 0, result.output
    assert f"pushed the figures to {endpoint}" in result.output
    assert "/v1/metrics" in _OtlpReceiver.paths


def _serve_and_scrape(run: Path, tmp_path: Path, processes: ProcessSet, engines: dict[str, str],
                      replayer: list[str], extra: tuple[str, ...] = ()):
    port = free_port()
    prom = start_prometheus(processes, ScrapeTargets(
        engines=engines, replayer=replayer, exporter=[f"127.0.0.1:{port}"],
        rule_files=[ROOT / "dashboards" / "rules.yml"]), tmp_path / "prometheus")
    json_path = tmp_path / "served.json"
    processes.start("exporter", layergate_command("metrics", str(run), "--serve", str(port),
                                                  "--json", str(json_path), *extra))
    return prom, json_path, port


def test_served_figures_reach_a_real_prometheus(tmp_path: Path, prometheus_bin: str) -> None:
    run = _run_dir(tmp_path)
    processes = ProcessSet(tmp_path / "logs")
    try:
        prom, json_path, _ = _serve_and_scrape(run, tmp_path, processes, {}, [],
                                               ("--policy", str(POLICY), "--resamples", "200"))
        got = prom.wait_for('layergate_run_rer{arm="candidate",scenario="all"}', timeout=90)
        assert got, processes.processes[-1].log_tail()
        doc = json.loads(json_path.read_text())
        assert float(got[0]["value"][1]) == pytest.approx(_figure(doc, "rer")["value"])
        assert got[0]["metric"]["run"] == doc["run"]["id"]
        assert prom.wait_for("layergate_run_verdict", timeout=10)
        assert prom.wait_for('layergate_run_rer_threshold{scenario="all"}', timeout=10)
        assert prom.wait_for("layergate_run_exact_match_ci_low", timeout=10)
        assert all(r["health"] == "ok" for g in prom.rule_groups() for r in g["rules"])
    finally:
        processes.close()


@pytest.mark.model
def test_real_replay_end_to_end(full_engine: ManagedProcess, tmp_path: Path,
                                prometheus_bin: str) -> None:
    """run_replay against the real engine (as all three arms), live metrics and engine
    counters through the recording rules in a real Prometheus, a repeat suite in the run's
    determinism/ directory, then `layergate metrics`."""
    from layergate.harness.determinism import DeterminismConfig, run_determinism
    from layergate.harness.replay import ReplayConfig, run_replay

    url = full_engine.url
    arms = {"baseline": url, "baseline2": url, "candidate": url}
    traffic = write_traffic(tmp_path / "traffic.jsonl", [
        TrafficRecord(f"q{i}", i * 1.0, "short" if i % 2 else "long", "/v1/chat/completions",
                      {"messages": [{"role": "user", "content": f"Count to {i + 2}."}],
                       "max_tokens": 8, "temperature": 0}) for i in range(4)])
    replay_port = free_port()
    processes = ProcessSet(tmp_path / "logs")
    try:
        port = free_port()
        prom = start_prometheus(processes, ScrapeTargets(
            engines=arms, replayer=[f"127.0.0.1:{replay_port}"],
            exporter=[f"127.0.0.1:{port}"], rule_files=[ROOT / "dashboards" / "rules.yml"]),
            tmp_path / "prometheus")
        run = run_replay(ReplayConfig(out=tmp_path / "run", arms=arms, traffic=traffic,
                                      rate=1.0, metrics_port=replay_port, progress=False,
                                      metrics_linger_s=3.0))
        # the live replayer counters went through the recording rules
        assert prom.wait_for('arm:layergate_replay_seconds_per_token:rate5m{arm="candidate"}',
                             timeout=30)
        assert prom.wait_for('arm:layergate_prefix_cache_hit:ratio_rate5m{arm="baseline"}',
                             timeout=30)
        run_determinism(DeterminismConfig(targets={"candidate": url}, traffic=traffic,
                                          out=Path(run) / "determinism", repeats=2,
                                          concurrency=(1, 2), requests=2, progress=False))
        out = tmp_path / "figures.json"
        result = CliRunner().invoke(main, ["metrics", str(run), "--json", str(out),
                                           "--resamples", "200"])
        assert result.exit_code == 0, result.output
        doc = json.loads(out.read_text())
        det = _figure(doc, "output_determinism")
        assert det["n"] == 4 and set(det["detail"]["by_concurrency"]) == {"1", "2"}
        # 2 prompts x 2 repeats x 2 levels, read back from the run's determinism/ store
        repeats = load_run(run).determinism.results
        e2e = [r.e2e_s for r in repeats if r.ok]
        latency = _figure(doc, "latency_determinism")
        assert latency["detail"]["requests"] == len(e2e) == 8
        assert 1.0 <= latency["value"] <= max(e2e) / min(e2e)
        memory: dict[tuple, list[float]] = {}
        for r in repeats:
            memory.setdefault((r.request_id, r.concurrency), []).append(
                r.extension["peak_memory_bytes"])
        assert _figure(doc, "resource_determinism")["value"] == pytest.approx(
            np.mean([np.std(m) for m in memory.values()]))
        rer = _figure(doc, "rer")
        assert rer["n"] == 4 and rer["status"] == "insufficient" and rer["value"] is not None
        assert rer["ci_low"] is not None and rer["ci_high"] is not None
        assert _figure(doc, "e2e_p50", arm="baseline")["value"] > 0
        assert _figure(doc, "termination_accuracy")["n"] == 4
        for name in ("exact_match", "bleu", "chrf", "first_divergence"):
            f = _figure(doc, name)
            assert f["value"] is not None and f["noise_floor"] is not None, name
        assert _figure(doc, "rer_theoretical")["value"] == 0.0  # policy full skips nothing
        assert 0 < _figure(doc, "token_efficiency", arm="baseline")["value"] <= 1
        processes.start("exporter", layergate_command("metrics", str(run), "--serve", str(port),
                                                      "--resamples", "100"))
        got = prom.wait_for('layergate_run_rer{arm="candidate",scenario="all"}', timeout=90)
        assert got and float(got[0]["value"][1]) == pytest.approx(rer["value"])
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
    finally:
        processes.close()


def test_policy_verdict_judges_the_figures_shown(tmp_path: Path) -> None:
    """The verdict beside the figures (printed, written, served) comes from those very
    figures: with --min-samples 50 over 30 requests every figure is insufficient, so the
    verdict is inconclusive, not the fail the gate's own settings would give."""
    run, out = _run_dir(tmp_path), tmp_path / "figures.json"
    result = CliRunner().invoke(main, ["metrics", str(run), "--json", str(out), "--policy",
                                       str(POLICY), "--resamples", "60", "--seed", "3",
                                       "--min-samples", "50"])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert _figure(doc, "exact_match")["status"] == "insufficient"
    assert doc["verdict"] == "inconclusive"
    # without it the same figures are ok, and exact match (22/30 against a floor of 1.0)
    # fails the policy
    same = CliRunner().invoke(main, ["metrics", str(run), "--json", str(out), "--policy",
                                     str(POLICY), "--resamples", "60", "--seed", "3"])
    assert same.exit_code == 0, same.output
    assert json.loads(out.read_text())["verdict"] == "fail"
