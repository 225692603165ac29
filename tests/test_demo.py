"""`layergate demo --quick` end to end, as `make demo` runs it but smaller: five real
engines (baseline, baseline2 and the three candidates), a real Prometheus, a real replay,
the repeat suite, each candidate's verdict, the leaderboard and the reports; then the HTML
report is rendered in headless Chromium.

The gate runs the default policy with its minimum samples lowered to the quick run's size
(under the default's 20, every figure of 8 requests is inconclusive), so each candidate's
verdict is decided and stated: `static` (12 of 30 layers pruned) fails on exact match;
`speculative` answers as the baselines do (exact match does not fail) but saves nothing
on a CPU, so it cannot clear the 20 % RER target; `dynamic`'s calibrated rule fires on 5 of
the 8 prompts and skips 8 of 30 layers there, a theoretical saving under the target, so it
cannot pass either. No candidate passes: the recommendation is none."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from junitparser import JUnitXml

from layergate.exporters.catalogue import FAIL, INCONCLUSIVE, PASS, REQUIRE_ANY
from layergate.harness.gate.policy import flattened
from layergate.harness.stack.demo_config import DEFAULT_CANDIDATES as CANDIDATES
from layergate.harness.stack.demo_config import QUICK

pytestmark = [pytest.mark.chromium, pytest.mark.locust, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]


@pytest.mark.model
@pytest.mark.slow
def test_quick_demo_ends_with_a_verdict_and_a_report(tmp_path: Path,
                                                     chromium_bin: str,
                                                     prometheus_bin: str) -> None:
    out = tmp_path / "runs"
    policy = flattened("default")
    policy["min_samples"] = QUICK["requests"]
    policy["metrics"]["output_determinism"]["min_samples"] = QUICK["determinism_prompts"]
    policy_path = tmp_path / "quick-default.yaml"
    policy_path.write_text(yaml.safe_dump(policy, sort_keys=False))
    proc = subprocess.run([sys.executable, "-m", "layergate.harness.cli", "demo", "--quick",
                           "--policy", str(policy_path), "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    verdict = re.search(r"verdict: (pass|fail|inconclusive)\s+rollout: (.+?)\s+report: (\S+)",
                        proc.stdout)
    assert verdict, log[-4000:]
    (run_dir,) = out.iterdir()
    gate = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == verdict.group(1)
    assert Path(verdict.group(3)) == run_dir / "report.html"
    # a verdict per candidate, with its reasons, and the leaderboard with the recommendation
    assert set(gate["candidates"]) == set(CANDIDATES)
    assert {row["name"] for row in gate["leaderboard"]} == set(CANDIDATES)
    # the demo's mix (saas-qa) carries questions with reference answers: accuracy is shown
    assert all("accuracy_delta" in row for row in gate["leaderboard"]), gate["leaderboard"]
    # one screen: the leaderboard, the run's verdict and where to look (a saturated
    # candidate's reasons run longest); each candidate's checks are in the reports, its
    # verdict in plain words in summary.md
    assert len(log.splitlines()) <= 70, log
    summary = (run_dir / "summary.md").read_text()
    for name in CANDIDATES:
        assert re.search(rf"{name}: (PASS|FAIL|INCONCLUSIVE)", summary), name
        assert re.search(rf"• {name}: (pass|fail|inconclusive) at confidence", proc.stdout)
    assert "Leaderboard" in proc.stdout
    verdicts = {name: gate["candidates"][name]["verdict"] for name in CANDIDATES}
    metrics = {name: gate["candidates"][name]["metrics"] for name in CANDIDATES}
    assert verdicts["static"] == FAIL, gate["candidates"]["static"]["run"]["reasons"]
    assert metrics["static"]["exact_match"]["status"] == FAIL
    assert "static: FAIL" in summary
    assert metrics["speculative"]["exact_match"]["status"] != FAIL
    assert metrics["speculative"]["rer"]["status"] != PASS
    assert verdicts["speculative"] != PASS and verdicts["dynamic"] != PASS, verdicts
    assert gate["recommended"] is None and "recommended: none" in proc.stdout
    # `demo` asks one candidate to pass (--require any): none does, so the run is
    # inconclusive while one is, else failed
    assert gate["require"] == REQUIRE_ANY
    assert gate["verdict"] == (INCONCLUSIVE if INCONCLUSIVE in verdicts.values() else FAIL)
    assert len(JUnitXml.fromfile(str(run_dir / "junit.xml"))) == len(CANDIDATES)
    for expected in ("where to look", "summary.md", "report.md", "--hold keeps it up"):
        assert expected in proc.stdout, proc.stdout[-3000:]
    assert "/graph?g0.expr=" not in proc.stdout  # Prometheus' graphs: only while it is up
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert list(manifest["arms"]) == ["baseline", "baseline2", *CANDIDATES]
    assert (run_dir / "determinism" / "manifest.json").is_file()
    # every process the demo started is gone
    for name in ("prometheus", "engine-baseline", *(f"engine-{c}" for c in CANDIDATES),
                 "exporter"):
        assert (run_dir / "stack" / "logs" / f"{name}.log").is_file()
    leftovers = subprocess.run(["pgrep", "-f", str(run_dir)], capture_output=True, text=True)
    assert not leftovers.stdout.strip(), f"processes left running: {leftovers.stdout}"
    scraped = yaml.safe_load((run_dir / "stack" / "prometheus" / "prometheus.yml").read_text())
    urls = [*re.findall(r"^Prometheus: (http://\S+) ", proc.stdout, re.M),
            *(f"http://{target}" for job in scraped["scrape_configs"]
              if job["job_name"] == "layergate-engine"
              for group in job["static_configs"] for target in group["targets"])]
    assert len(urls) == 2 + len(CANDIDATES) + 1, proc.stdout[:3000]
    for url in urls:
        with pytest.raises(httpx.ConnectError):
            httpx.get(url, timeout=5)

    png = tmp_path / "report.png"
    shot = subprocess.run([chromium_bin, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'c'}",
                           "--enable-logging=stderr", "--v=0", "--window-size=1280,2000",
                           f"--screenshot={png}", (run_dir / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert png.is_file() and png.stat().st_size > 20_000, shot.stderr[-3000:]
    console_errors = [line for line in shot.stderr.splitlines()
                      if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)]
    assert not console_errors, console_errors
    dom = subprocess.run([chromium_bin, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'd'}",
                          "--dump-dom", (run_dir / "report.html").as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert verdict.group(1) in dom.lower() and "<img" in dom
