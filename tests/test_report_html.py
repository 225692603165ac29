"""The HTML report: one self-contained file that renders in headless Chromium without
console errors, with every plot embedded, and the Markdown summary beside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from layergate.harness.gate import evaluate
from layergate.harness.report import render_markdown, write_html
from layergate.harness.report.html import PLOTS
from tests.test_gate_cli import Shape, build_run

pytestmark = [pytest.mark.chromium]

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    run = build_run(tmp_path_factory.mktemp("run") / "diverging", Shape(diverge_every=3))
    return evaluate(run)


@pytest.fixture(scope="module")
def page(result, tmp_path_factory) -> Path:
    return write_html(result, tmp_path_factory.mktemp("html") / "report.html")


def test_html_is_self_contained_with_one_image_per_plot(page):
    page = page.read_text()
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"',
                        page)
    assert [alt for alt, _ in images] == [title for _, title, _ in PLOTS]
    assert all(len(data) > 5000 for _, data in images)  # real plots, not placeholders
    # nothing to fetch: no external URL in src / href, no script
    assert not re.search(r'(src|href)="(https?:|//)', page)
    assert "<script" not in page
    assert "FAIL" in page and "Worst diverging requests" in page
    assert page.count("<del>") and page.count("<ins>")  # the token-level diff
    for scenario in ("short", "medium", "long"):
        assert f"Scenario <code>{scenario}</code>" in page


def test_html_renders_in_chromium_without_console_errors(page, tmp_path, chromium_bin):
    shot = tmp_path / "report.png"
    proc = subprocess.run(
        [chromium_bin, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri()],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert shot.read_bytes()[:8] == PNG_MAGIC
    assert shot.stat().st_size > 50_000  # a rendered page, not a blank one
    console = [line for line in proc.stderr.splitlines()
               if "CONSOLE" in line or "net::ERR" in line or "Uncaught" in line]
    assert console == [], console


def test_markdown_summary_fits_a_ci_job(result):
    text = render_markdown(result)
    assert text.startswith("## ❌ layergate gate: **FAIL**")
    assert "| ❌ | exact_match |" in text
    assert "rollout recommendation: **do not roll out**" in text
    assert "### Scenario `long`" in text


def test_console_error_detection_is_live(tmp_path, chromium_bin):
    """The check above would catch a page error: a page that throws shows up in the log."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><script>console.error('boom'); undefinedCall()</script>")
    proc = subprocess.run(
        [chromium_bin, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={tmp_path / 'bad.png'}", "--window-size=400,300", bad.as_uri()],
        capture_output=True, text=True, timeout=60)
    assert any("CONSOLE" in line and "boom" in line for line in proc.stderr.splitlines()), \
        proc.stderr[-2000:]


