"""The native stack's parts without the model: the generated Prometheus config (checked
by the real promtool), a real Prometheus started and stopped, and every child process
stopped on close, on Ctrl-C and on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from layergate.harness.stack import ProcessSet, ScrapeTargets, render_prometheus_config
from layergate.harness.stack.prometheus import start_prometheus
from layergate.harness.stack.prometheus_config import write_prometheus_config
from tests.support.processes import interruptible

pytestmark = [pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def _targets() -> ScrapeTargets:
    return ScrapeTargets(engines={"baseline": "http://127.0.0.1:18001",
                                  "candidate": "http://127.0.0.1:18002/"},
                         replayer=["127.0.0.1:19102"], exporter=["127.0.0.1:19103"])


def test_generated_config_sets_arm_as_target_label() -> None:
    config = render_prometheus_config(_targets())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    engines = jobs["layergate-engine"]["static_configs"]
    assert [(s["targets"], s["labels"]["arm"]) for s in engines] == [
        (["127.0.0.1:18001"], "baseline"), (["127.0.0.1:18002"], "candidate")]
    # the replayer and the exporter carry their own arm / scenario / run labels
    assert jobs["layergate-replayer"]["honor_labels"] is True
    assert jobs["layergate-exporter"]["honor_labels"] is True
    assert "labels" not in jobs["layergate-replayer"]["static_configs"][0]


def test_same_jobs_and_labels_as_compose() -> None:
    compose = yaml.safe_load((ROOT / "dashboards" / "prometheus.yml").read_text())
    native = render_prometheus_config(_targets())

    def shape(cfg: dict) -> dict:
        return {j["job_name"]: (j.get("honor_labels", False),
                                sorted(s.get("labels", {}).get("arm", "")
                                       for s in j["static_configs"]))
                for j in cfg["scrape_configs"] if j["job_name"].startswith("layergate-")}

    got, want = shape(native), shape(compose)
    assert got["layergate-replayer"] == want["layergate-replayer"]
    assert got["layergate-exporter"] == want["layergate-exporter"]
    assert set(got["layergate-engine"][1]) <= set(want["layergate-engine"][1])


def test_generated_config_passes_promtool(tmp_path: Path, promtool_bin: str) -> None:
    path = write_prometheus_config(_targets(), tmp_path / "prometheus.yml")
    res = subprocess.run([promtool_bin, "check", "config", str(path)], capture_output=True,
                         text=True, timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr


def test_bad_engine_url_is_refused() -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        render_prometheus_config(ScrapeTargets(engines={"baseline": "http://127.0.0.1"}))


def test_real_prometheus_starts_scrapes_and_stops(tmp_path: Path, prometheus_bin: str) -> None:
    procs = ProcessSet(tmp_path / "logs")
    try:
        prom = start_prometheus(procs, _targets(), tmp_path / "prom")
        deadline = time.monotonic() + 20
        while not (targets := prom.targets()) and time.monotonic() < deadline:
            time.sleep(0.2)  # service discovery runs just after start
        arms = {t["labels"].get("arm") for t in targets if t["labels"]["job"] ==
                "layergate-engine"}
        assert arms == {"baseline", "candidate"}
        assert prom.query("vector(1)")[0]["value"][1] == "1"
        assert "g0.expr=up" in prom.graph_link("up")
        pid = prom.process.pid
    finally:
        procs.close()
    assert not _alive(pid)


CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from layergate.harness.stack import ProcessSet
    procs = ProcessSet(Path(sys.argv[1]))
    a = procs.start("sleeper", ["sleep", "300"])
    # a grandchild in the same group: must die with its leader
    b = procs.start("shell", ["sh", "-c", "sleep 300 & echo $! > %s/grandchild; wait"
                              % sys.argv[1]])
    while not (Path(sys.argv[1]) / "grandchild").exists():
        time.sleep(0.05)
    gc = int((Path(sys.argv[1]) / "grandchild").read_text())
    print(json.dumps([a.pid, b.pid, gc]), flush=True)
    try:
        while True:
            time.sleep(0.1)
    except KeyboardInterrupt:
        procs.close()
        raise
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_every_child_stops_on_interrupt(tmp_path: Path, sig: int) -> None:
    parent = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT,
                              preexec_fn=interruptible)
    pids = json.loads(parent.stdout.readline())
    assert all(_alive(p) for p in pids)
    parent.send_signal(sig)
    parent.wait(30)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], "children outlived their parent"


def test_children_stop_at_exit_without_close(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from layergate.harness.stack import ProcessSet;"
            "p = ProcessSet(Path(sys.argv[1])); print(p.start('s', ['sleep', '300']).pid)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    pid = int(out.stdout)
    time.sleep(0.2)
    assert not _alive(pid)
