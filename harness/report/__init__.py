"""Reports of a gate result: terminal summary, JSON, JUnit, Markdown and self-contained HTML.

Every writer takes a `GateResult` (from `layergate.harness.gate.evaluate`) and a path;
commands reach them through the registries of `formats.py`, by format name.
"""

from __future__ import annotations

from layergate.harness.report.html import render_html, write_html
from layergate.harness.report.json_report import to_dict, write_json
from layergate.harness.report.junit import render_junit, write_junit
from layergate.harness.report.markdown import render_markdown, write_markdown
from layergate.harness.report.terminal import print_summary

__all__ = ["print_summary", "render_html", "render_junit", "render_markdown", "to_dict",
           "write_html", "write_json", "write_junit", "write_markdown"]
