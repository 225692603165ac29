"""Every PromQL expression of every dashboard and of dashboards/rules.yml, run against a
real Prometheus that scraped real engines (the shared full-depth `full_engine` as the
baseline and one skipping candidate started by the native stack), a real replay's live
metrics, the finished-run exporter and a `layergate watch --serve` reading the engines:
no query errors, and the core panels show data."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from layergate.exporters.traffic import read_traffic, write_traffic
from layergate.harness.processes import free_port
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.stack import EngineSpec, NativeStack, StackConfig
from layergate.harness.stack.native import RULES_FILE, RunningStack

pytestmark = [pytest.mark.locust, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[1]
BOARDS = sorted((ROOT / "dashboards" / "grafana").glob("*.json"))
POLICY = ROOT / "scenarios" / "policies" / "default.yaml"
SCRAPE_S = 1.0
REQUESTS = 6
MAX_TOKENS = 12

# panels that must show data after a replay (title per dashboard uid)
CORE = {
    "layergate-ab-overview": {"Verdict", "RER (redundancy elimination rate)",
                              "Termination accuracy", "Exact match vs baseline",
                              "Live exact match vs baseline", "Watch state",
                              "Watch stage (% of traffic on the candidate)"},
    "layergate-latency": {"TTFT p50 / p90 / p99", "TPOT p50 / p90 / p99",
                          "E2E p50 / p90 / p99", "Replay error rate",
                          "Engine TTFT p50 / p90 / p99", "Engine E2E p50 / p90 / p99",
                          "Engine error rate", "Latency figures of the run"},
    "layergate-layer-skipping": {"Skip rate", "Layers executed per output token",
                                 "Decision latency p50 / p90 / p99"},
    "layergate-engine": {"Generation throughput (tokens / s)", "Requests / s by status",
                         "Batch size", "Padding efficiency", "Prefix-cache tokens / s",
                         "Resident memory", "CPU (cores)"},
}


@dataclass(frozen=True)
class Observed:
    stack: RunningStack
    start: float
    end: float
    run_dir: Path


def _small_traffic(path: Path) -> Path:
    """The first records of the bundled evaluation traffic, short outputs, arriving fast."""
    records = read_traffic(ROOT / "scenarios" / "traffic" / "eval.jsonl").records[:REQUESTS]
    records = [dataclasses.replace(r, offset_s=0.5 * i,
                                   body={**r.body, "max_tokens": MAX_TOKENS})
               for i, r in enumerate(records)]
    return write_traffic(path, records)


@pytest.fixture(scope="module")
def observed(full_engine, tmp_path_factory, prometheus_bin) -> Iterator[Observed]:
    work = tmp_path_factory.mktemp("promql")
    engines = (EngineSpec("baseline", url=full_engine.url),
               EngineSpec("candidate", skip_policy="dynamic"))
    watch_port = free_port()
    watch_job = {"job_name": "layergate-watch",
                 "static_configs": [{"targets": [f"127.0.0.1:{watch_port}"]}]}
    config = StackConfig(engines=engines, workdir=work, scrape_interval_s=SCRAPE_S,
                         extra_jobs=(watch_job,))
    with NativeStack(config) as stack:
        stack.processes.start("watch", [
            sys.executable, "-m", "layergate", "watch", "--prometheus", stack.prometheus.url,
            "--baseline", 'arm="baseline"', "--candidate", 'arm="candidate"', "--window", "3s",
            "--lag", "1s", "--min-windows", "1000", "--max-windows", "1000",
            "--no-data-windows", "1000", "--serve", str(watch_port)])
        start = time.time()
        run_dir = run_replay(ReplayConfig(
            out=work / "run", arms=stack.arms, traffic=_small_traffic(work / "traffic.jsonl"),
            metrics_port=stack.replayer_metrics_port, max_in_flight=4, progress=False,
            metrics_linger_s=3 * SCRAPE_S))
        stack.start_exporter(run_dir, ("--policy", str(POLICY)))
        assert stack.prometheus.wait_for("layergate_run_rer", timeout=20), \
            "the exporter's figures never reached Prometheus"
        # its figures need a window in which both arms finished requests: six requests may
        # not give one on a busy machine, so only its state and stage must show data
        assert stack.prometheus.wait_for('layergate_watch_state{state="watching"}', 20), \
            "the watch never reached Prometheus"
        time.sleep(3 * SCRAPE_S)  # a few rule evaluations over the final data
        yield Observed(stack, start, time.time(), run_dir)


def _substitute(expr: str, window_s: float) -> str:
    expr = expr.replace("$__rate_interval", f"{int(4 * SCRAPE_S)}s")
    expr = expr.replace("$__range", f"{math.ceil(window_s)}s")
    return re.sub(r"\$\{?(arm|scenario|run)\}?", ".*", expr)


def _has_data(result: list[dict]) -> bool:
    return any(not math.isnan(float(v)) for series in result
               for _, v in series.get("values", [series.get("value", [0, "NaN"])]))


@pytest.mark.model
@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.stem)
def test_every_dashboard_query_runs(observed: Observed, path: Path) -> None:
    board = json.loads(path.read_text())
    prom, window = observed.stack.prometheus, observed.end - observed.start
    empty_core = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            expr = _substitute(target["expr"], window)
            if target.get("instant"):
                result = prom.query(expr, at=observed.end)
            else:
                result = prom.query_range(expr, observed.start, observed.end, step=SCRAPE_S)
            if panel["title"] in CORE[board["uid"]] and target["refId"] == "A" \
                    and not _has_data(result):
                empty_core.append(f"{panel['title']}: {expr}")
    assert not empty_core, "core panels without data:\n" + "\n".join(empty_core)


@pytest.mark.model
@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.stem)
def test_template_variables_resolve(observed: Observed, path: Path) -> None:
    prom = observed.stack.prometheus
    for var in json.loads(path.read_text())["templating"]["list"]:
        m = re.fullmatch(r"label_values\((.+), (\w+)\)", var["query"]["query"])
        assert m, f"unexpected variable query {var['query']}"
        values = prom.label_values(m.group(2), m.group(1))
        assert values, f"${var['name']} has no values ({var['query']['query']})"


@pytest.mark.model
def test_arm_labels_come_from_the_scrape_config(observed: Observed) -> None:
    result = observed.stack.prometheus.query('up{job="layergate-engine"}')
    assert {r["metric"]["arm"]: r["value"][1] for r in result} == {"baseline": "1",
                                                                   "candidate": "1"}
    # the replayer's own arm label survives (honor_labels), not renamed to exported_arm
    arms = observed.stack.prometheus.label_values("arm", "layergate_replay_requests_total")
    assert set(arms) == {"baseline", "candidate"}


@pytest.mark.model
def test_every_recording_rule_evaluates(observed: Observed) -> None:
    prom = observed.stack.prometheus
    rules = [r for g in yaml.safe_load(RULES_FILE.read_text())["groups"] for r in g["rules"]]
    assert rules, f"{RULES_FILE} has no rules"
    for rule in rules:
        prom.query_range(rule["expr"], observed.start, observed.end, step=SCRAPE_S)
    loaded = [r for g in prom.rule_groups() for r in g["rules"]]
    assert len(loaded) == len(rules)
    unhealthy = [(r["name"], r.get("lastError")) for r in loaded if r["health"] != "ok"]
    assert not unhealthy, unhealthy
    recorded = [r["record"] for r in rules if "record" in r]
    with_data = [name for name in recorded if prom.query(name)]
    assert with_data, f"no recording rule produced data: {recorded}"
