"""docker-compose.yml run for real, twice, from fresh volumes: the test's own dockerd (Debian's
docker.io, overlay2 where overlays mount, else vfs; no bridge, no iptables), images built
here from Debian packages and this machine's wheels (tests/support/stack_images.py, cached),
Debian's docker-compose, every container on host networking and loopback
(tests/support/compose_stack.py).

The project directory is what `layergate init --install-from WHEEL` writes (the wheel of
tests/support/dist.py), and layergate's image is built from the starter's own Dockerfile,
with a user's traffic file in it (captured.jsonl: 8 short and medium requests) replayed
through the TRAFFIC variable and the starter's policy.yaml through POLICY; the arms are the
reference engines (the `engines` profile) through BASELINE_URL, BASELINE2_URL and
CANDIDATE_URL.

First `up`: the engines (real SmolLM2, 1 thread each) become healthy, `arms` sees them
answer, the replay of the user's file runs once, the exporter serves its figures, the real
Prometheus scrapes engines, replayer and exporter through the mounted config and evaluates
the mounted recording rules;
`docker-compose run --rm gate` writes its four files into the runs volume and exits with the
gate's code. Second `up`: nothing crashes, the run is neither sent again nor lost.
Grafana and Jaeger cannot be built here: tests/test_compose.py checks them by structure."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from layergate.exporters.catalogue import INCONCLUSIVE, PASS, ExitCode
from layergate.exporters.traffic import traffic_sha256, write_traffic
from layergate.harness import install_source
from layergate.harness.scenarios import build_traffic
from layergate.harness.starter import starter_files, write_files
from tests.support import dist
from tests.support.compose_stack import ComposeStack, poll
from tests.support.docker_engine import DockerEngine, docker_engine
from tests.support.stack_images import cache_size, ensure_images

pytestmark = [pytest.mark.timeout(2400), pytest.mark.docker, pytest.mark.slow, pytest.mark.model,
              pytest.mark.locust, pytest.mark.prometheus]
RUN = "compose"  # the replay's --out in the runs volume
USER_TRAFFIC = "captured.jsonl"  # the compose_stack ENVIRONMENT's TRAFFIC


@pytest.fixture(scope="module")
def engine() -> Iterator[DockerEngine]:
    with docker_engine() as eng:
        yield eng


@pytest.fixture(scope="module")
def stack(engine: DockerEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeStack]:
    project = tmp_path_factory.mktemp("project")
    # what `layergate init --install-from WHEEL` writes, with the wheel `make dist` builds
    write_files(project, starter_files(install_source.given(str(dist.built().wheel))))
    # "a user's capture": the smoke mix's 8 requests under the user's own ids and times
    records = [dataclasses.replace(r, id=f"user-{i:03d}", offset_s=0.5 * i)
               for i, r in enumerate(build_traffic("smoke"))]
    write_traffic(project / USER_TRAFFIC, records)
    # a user's project is readable by the containers' unprivileged user (pytest makes its
    # temporary directories private)
    for path in (project, *project.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    started = time.monotonic()
    ensure_images(engine, project)  # the image from the starter's own Dockerfile
    print(f"\nimages ready in {time.monotonic() - started:.0f} s on {engine.driver}; "
          f"cache {cache_size() / 2**30:.2f} GiB")
    stack = ComposeStack(engine, tmp_path_factory.mktemp("compose"), project)
    try:
        yield stack
    finally:
        stack.down()


def _rows(run_dir: Path) -> int:
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        return db.execute("SELECT count(*) FROM results").fetchone()[0]


def test_first_up_on_fresh_volumes_runs_the_whole_loop(stack: ComposeStack) -> None:
    started = time.monotonic()
    stack.up()
    for engine in ("baseline", "baseline2", "candidate"):
        stack.wait_healthy(engine, timeout=600)
    code = stack.wait_exited("replayer", timeout=900)
    assert code == 0, stack.logs("replayer")
    run_dir = stack.volume_dir("runs") / RUN
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["traffic"]["count"] == 8
    # the user's file, through TRAFFIC (not the default mix)
    assert manifest["traffic"]["sha256"] == traffic_sha256(stack.project_dir / USER_TRAFFIC)
    assert _rows(run_dir) == 8 * 3  # every request to every arm, once
    assert stack.wait_exited("arms", timeout=10) == 0
    stack.wait_healthy("exporter", timeout=300)
    exported = stack.get("exporter", 9103, "/metrics")
    assert "layergate_" in exported and manifest["id"] in exported

    # the real Prometheus, through the mounted config: every target was up, and the
    # recording rules of the mounted rules.yml produced series from the engines' metrics
    def scraped() -> bool:
        up = {(r["metric"]["job"], r["metric"].get("arm", "")): r["value"][1]
              for r in stack.prometheus_query("max_over_time(up[1h])")}
        wanted = {("layergate-engine", "baseline"), ("layergate-engine", "baseline2"),
                  ("layergate-engine", "candidate"), ("layergate-replayer", ""),
                  ("layergate-exporter", "")}
        assert {k for k, v in up.items() if v == "1"} >= wanted, up
        return True

    poll(scraped, timeout=120, what="Prometheus scraping every layergate target")
    rules = poll(lambda: stack.prometheus_query(
        '{__name__=~"arm:layergate_engine_.*"}'), timeout=120, what="recording rule series")
    assert {r["metric"]["arm"] for r in rules} >= {"baseline", "candidate"}
    # the replayer has exited (its series are stale now): what was scraped while it ran,
    # and the rules evaluated on it
    replayed = stack.prometheus_query("last_over_time(layergate_replay_requests_total[1h])")
    assert {r["metric"]["arm"] for r in replayed} == {"baseline", "baseline2", "candidate"}
    assert stack.prometheus_query("last_over_time(arm:layergate_replay_error:ratio_rate5m[1h])")
    print(f"first up: {time.monotonic() - started:.0f} s")


def test_gate_service_writes_the_reports_and_passes_its_exit_code(stack: ComposeStack) -> None:
    done = stack.compose("--profile", "gate", "run", "-T", "--rm", "gate", check=False)
    run_dir = stack.volume_dir("runs") / RUN
    for name in ("gate.json", "junit.xml", "report.md", "report.html"):
        assert (run_dir / name).stat().st_size > 0, name
    gate = json.loads((run_dir / "gate.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert gate["run"]["id"] == manifest["id"] and gate["run"]["status"] == "complete"
    assert gate["run"]["policy"]["path"] == "policy.yaml"  # POLICY: the project's file
    # 8 requests are fewer than the policy's min_samples: every figure is inconclusive, no
    # arm erred, so the verdict is inconclusive, and the container exits with that code
    policy = yaml.safe_load((stack.project_dir / "policy.yaml").read_text())
    assert policy["min_samples"] > 8
    assert gate["metrics"]["exact_match"]["status"] == INCONCLUSIVE
    assert gate["metrics"]["exact_match"]["n"] == 8
    errors = {k: m["status"] for k, m in gate["metrics"].items() if k.startswith("error_rate")}
    assert len(errors) == 3 and set(errors.values()) == {PASS}, errors
    assert gate["verdict"] == INCONCLUSIVE, gate["run"]["reasons"]
    assert done.returncode == gate["run"]["exit_code"] == ExitCode.INCONCLUSIVE
    # a verdict is not a crash: the servers still run
    for service in ("baseline", "candidate", "exporter", "prometheus"):
        assert stack.container(service)["State"]["Status"] == "running", service


def test_second_up_neither_crashes_nor_duplicates_nor_loses_the_run(stack: ComposeStack) -> None:
    runs = stack.volume_dir("runs")
    run_dir = runs / RUN
    before = json.loads((run_dir / "manifest.json").read_text())
    rows = _rows(run_dir)
    stack.up()
    assert stack.wait_exited("replayer", timeout=600) == 0, stack.logs("replayer")
    after = json.loads((run_dir / "manifest.json").read_text())
    assert after == before  # the complete run is left alone: same id, nothing appended
    assert _rows(run_dir) == rows
    assert sorted(p.name for p in runs.iterdir() if (p / "manifest.json").exists()) == [RUN]
    assert "nothing to send" in stack.logs("replayer")
    stack.wait_healthy("exporter", timeout=300)
    assert before["id"] in stack.get("exporter", 9103, "/metrics")
    for service in ("baseline", "baseline2", "candidate", "exporter", "prometheus"):
        state = stack.container(service)["State"]
        assert state["Status"] == "running" and state["Health"]["Status"] == "healthy", service
        assert stack.container(service)["RestartCount"] == 0, service
