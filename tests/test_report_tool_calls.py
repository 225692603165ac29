"""The HTML report on a run whose answers call tools and reason: the worst diverging pairs
keep room for pairs whose calls differ, and their cards show the calls compared call by
call (function, argument, baseline value → candidate value as JSON; calls one side lacks;
arguments that do not parse, as sent) and the reasoning folded away with both lengths. The
page renders in headless Chromium; the terminal, Markdown, JSON and JUnit reports and
`layergate metrics` take the new figures (a dict detail included)."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from layergate.exporters.catalogue import CANDIDATE, OVERALL
from layergate.exporters.records import ArmResult
from layergate.exporters.tool_calls import ToolCall, differing_keys
from layergate.harness.cli import main
from layergate.harness.gate import evaluate
from layergate.harness.manifest import Manifest
from layergate.harness.report import (
    print_summary,
    render_markdown,
    write_html,
    write_json,
    write_junit,
)
from layergate.harness.report.html import _calls_card
from layergate.harness.report.pairs import Pair, call_diff, pair_arms, worst
from layergate.harness.rundir import RunDir
from tests.test_gate_cli import ARMS
from tests.test_report_html import CHROMIUM_FLAGS, PNG_MAGIC

CALLS = 24  # tool-calling requests: the candidate changes the city of every other one
TEXTS = 8  # plain answers whose candidate parts ways at the first word
THINK_A = "Let me think."
THINK_B = "Let me think about the weather in Paris first, then call the tool."


def _call_row(i: int, arm: str) -> ArmResult:
    city = "Lyon" if arm == CANDIDATE and i % 2 == 0 else "Paris"
    thinking = THINK_B if arm == CANDIDATE else THINK_A
    return ArmResult(
        request_id=f"call-{i:02d}", arm=arm, scenario="tools", ok=True, http_status=200,
        ttft_s=0.05, answer_ttft_s=0.3, e2e_s=0.5 + 0.01 * (i % 3), itl_s=(0.05,) * 5,
        output_tokens=12, prompt_tokens=30, finish_reason="tool_calls", tokens_from="usage",
        tool_calls=(ToolCall("get_weather", json.dumps({"city": city, "unit": "C"}), "c0"),),
        reasoning_text=thinking, reasoning_tokens=12 if arm == CANDIDATE else 4,
        schema_valid={"tool_calls": True})


def _text_row(i: int, arm: str) -> ArmResult:
    first = "An" if arm == CANDIDATE else "The"
    return ArmResult(
        request_id=f"text-{i:02d}", arm=arm, scenario="chat", ok=True, http_status=200,
        ttft_s=0.05, e2e_s=0.4, itl_s=(0.05,) * 4, output_text=f"{first} answer is four.",
        output_tokens=5, prompt_tokens=20, finish_reason="stop", tokens_from="usage")


def build_tool_run(path: Path) -> Path:
    run = RunDir(path)
    with run.open_store() as store:
        for arm in ARMS:
            for i in range(CALLS):
                store.put(_call_row(i, arm))
            for i in range(TEXTS):
                store.put(_text_row(i, arm))
    n = CALLS + TEXTS
    manifest = Manifest.new("replay", {"constructed": True}, ARMS,
                            {"path": "traffic.jsonl", "sha256": "0" * 64, "count": n})
    run.write_manifest(manifest.with_status("complete", {a: {"ok": n, "error": 0}
                                                         for a in ARMS}))
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tool_run(tmp_path_factory.mktemp("run") / "tools")


@pytest.fixture(scope="module")
def result(run_dir):
    return evaluate(run_dir, "no-regression")


@pytest.fixture(scope="module")
def page(result, tmp_path_factory) -> Path:
    return write_html(result, tmp_path_factory.mktemp("html") / "report.html")


def test_the_worst_pairs_keep_room_for_changed_calls(result) -> None:
    pairs = pair_arms(result.results, CANDIDATE)
    # the plain answers part ways at their first word, so they alone would fill the view
    assert all(not p.has_calls for p in worst(pairs))
    shown = worst(pairs, calls=2)
    assert len(shown) == 5 and sum(p.calls_differ for p in shown) == 2
    assert all(p.request_id.startswith("call-") for p in shown if p.has_calls)
    # a pair whose calls agree is not "diverging" (the same answer): never shown for them
    assert all(p.divergence is None for p in pairs
               if p.has_calls and not p.calls_differ)


def test_the_card_names_the_function_and_the_changed_argument(page) -> None:
    text = page.read_text()
    assert text.count("<div class=calls>") == 2
    assert ("<tr class=call-argument><td>0</td><td><code>get_weather</code></td>"
            "<td><code>city</code></td><td class=old><code>&quot;Paris&quot;</code></td>"
            "<td class=new><code>&quot;Lyon&quot;</code></td></tr>") in text
    assert "Tool calls: 1 on the baseline, 1 on the candidate; 1 differ" in text
    assert "<code>unit</code>" not in text  # the argument that agrees is not listed
    # over the whole run: tool_call_agreement's detail["differing"]
    assert f"<code>get_weather.city</code> {CALLS // 2}×" in text
    # the answers side by side: the calls as "the same output" compares them
    assert "<del>Paris</del>" in text and "<ins>Lyon</ins>" in text
    # the reasoning, folded away, with both lengths
    assert text.count("<details class=reasoning>") == 2
    assert (f"Reasoning: baseline 4 tokens ({len(THINK_A)} characters) · candidate 12 "
            f"tokens ({len(THINK_B)} characters)") in text
    # the plain pairs have neither
    assert text.count("first divergence at output token 0") == 3
    assert "<script" not in text and "http://" not in text.replace("http://127.0.0.1", "")


@pytest.mark.chromium
def test_the_card_renders_in_chromium(page, tmp_path, chromium_bin) -> None:
    shot = tmp_path / "report.png"
    common = [chromium_bin, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    proc = subprocess.run([*common, f"--screenshot={shot}", "--window-size=1280,4000",
                           page.as_uri()], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert shot.read_bytes()[:8] == PNG_MAGIC and shot.stat().st_size > 50_000
    console = [line for line in proc.stderr.splitlines()
               if "CONSOLE" in line or "net::ERR" in line or "Uncaught" in line]
    assert console == [], console
    # the browser's own parse: the changed argument is a row of the card's table, the
    # reasoning inside a closed <details>
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=60)
    assert dom.returncode == 0, dom.stderr[-3000:]
    assert ('<tr class="call-argument"><td>0</td><td><code>get_weather</code></td>'
            '<td><code>city</code></td><td class="old"><code>"Paris"</code></td>'
            '<td class="new"><code>"Lyon"</code></td></tr>') in dom.stdout
    assert '<details class="reasoning"><summary>Reasoning: baseline 4 tokens' in dom.stdout


def _pair(a: tuple[ToolCall, ...], b: tuple[ToolCall, ...]) -> Pair:
    def arm(name: str, calls: tuple[ToolCall, ...]) -> ArmResult:
        return ArmResult("r", name, "s", ok=True, tool_calls=calls)
    return Pair("r", "s", arm("baseline", a), arm(CANDIDATE, b))


def test_calls_one_side_lacks_renamed_and_unparsed_are_shown() -> None:
    weather = ToolCall("get_weather", '{"city": "Paris"}')
    a = (weather, ToolCall("get_time", '{"tz": "CET"}'), ToolCall("f", "[1, 2]"))
    b = (ToolCall("get_weather", '{"city": "Pa'), ToolCall("get_date", "{}"),
         ToolCall("f", "[2, 1]"), ToolCall("book", '{"seat": "12A"}'))
    diffs = call_diff(a, b)
    assert [(d.index, d.kind) for d in diffs] == [(0, "unparsed"), (1, "renamed"),
                                                  (2, "arguments"), (3, "extra")]
    assert (diffs[0].before, diffs[0].after, diffs[0].raw) == (
        '{"city": "Paris"}', '{"city": "Pa', (False, True))
    card = _calls_card(_pair(a, b))
    assert "4 differ" in card
    assert "<span class='s s-fail'>not JSON</span> <code>{&quot;city&quot;: &quot;Pa</code>" \
        in card
    assert "<code>get_time → get_date</code>" in card
    assert "<code>book({&quot;seat&quot;:&quot;12A&quot;})</code>" in card
    assert "the call (none on the baseline)" in card
    missing = _calls_card(_pair(a[:1], ()))
    assert "the call (none on the candidate)" in missing and "(absent)" in missing
    same = call_diff((weather,), (ToolCall("get_weather", '{ "city":"Paris" }'),))
    assert [d.kind for d in same] == ["same"]


def test_the_keys_shown_are_those_the_figure_counts() -> None:
    a = (ToolCall("f", '{"x": 1, "y": [1, 2]}'), ToolCall("g", "{}"))
    b = (ToolCall("f", '{"x": 2, "y": [1, 2], "z": 0}'), ToolCall("h", "{}"))
    shown = [f"{d.name}.{d.key}" if d.kind == "argument" else str(d.name)
             for d in call_diff(a, b)]
    assert shown == differing_keys(a, b) == ["f.x", "f.z", "g"]
    z = next(d for d in call_diff(a, b) if d.key == "z")
    assert (z.before, z.after) == (None, "0")


def test_the_other_reports_take_the_new_figures(result, run_dir, tmp_path) -> None:
    agreement = next(f for f in result.figures if f.name == "tool_call_agreement"
                     and f.arm == CANDIDATE and f.scenario == OVERALL)
    assert agreement.detail["differing"] == {"get_weather.city": CALLS // 2}
    markdown = render_markdown(result)
    assert "| tool_call_agreement |" in markdown and "| reasoning_length_ratio |" in markdown
    out = io.StringIO()
    print_summary(result, Console(file=out, width=200), show_info=True)
    assert "tool_call_agreement" in out.getvalue() and "ttfat_p50" in out.getvalue()
    report = json.loads(write_json(result, tmp_path / "gate.json").read_text())
    assert report["metrics"]["tool_call_agreement"]["value"] == pytest.approx(0.5)
    assert "tool_call_agreement" in write_junit(result, tmp_path / "junit.xml").read_text()
    metrics = CliRunner().invoke(main, ["metrics", str(run_dir), "--resamples", "50",
                                        "--json", str(tmp_path / "figures.json")],
                                 env={"COLUMNS": "250"})
    assert metrics.exit_code == 0, metrics.output
    assert "tool_call_agreement" in metrics.output and "ttfat_p50" in metrics.output
    figures = json.loads((tmp_path / "figures.json").read_text())["figures"]
    assert {"get_weather.city": CALLS // 2} in [f["detail"].get("differing") for f in figures]
