"""The results store (SQLite, WAL, several writer processes), the manifest and `load_run`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from exporters.records import ArmResult
from exporters.traffic import TrafficRecord, write_traffic
from harness.manifest import Manifest, read_manifest, write_manifest
from harness.rundir import load_run, scrape_path
from harness.store import ResultStore

FULL = ArmResult(
    request_id="r1", arm="candidate", scenario="long", ok=True, http_status=200, ttft_s=0.1,
    e2e_s=0.5, itl_s=(0.1, 0.2), output_text="héllo", output_tokens=3, prompt_tokens=60,
    finish_reason="stop", max_tokens=8, token_ids=(5, 6, 2), logprobs=(-0.1, -0.2, -0.3),
    top_logprobs=({"a": -0.1}, {"b": -0.2}, {"c": -0.3}),
    extension={"policy": "dynamic", "peak_memory_bytes": 123, "token_ids": [5, 6, 2]},
    repeat=1, concurrency=4)


def test_every_field_round_trips(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.put(FULL, intended_at=1.0)
        store.put(ArmResult("r1", "baseline", "long", ok=False, error="timeout after 1s"))
        assert store.results() == [FULL, ArmResult("r1", "baseline", "long", ok=False,
                                                   error="timeout after 1s")]
        mode = store.conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


def test_a_repeated_pair_replaces_the_error(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.sqlite") as store:
        store.put(ArmResult("r1", "candidate", "s", ok=False, error="connection failed"))
        store.put(ArmResult("r1", "candidate", "s", ok=True, output_tokens=2))
        assert store.count() == 1 and store.ok_pairs() == {("r1", "candidate")}
        assert store.counts_by_arm() == {"candidate": {"ok": 1, "error": 0}}


WRITER = """
import sys
from exporters.records import ArmResult
from harness.store import ResultStore
store = ResultStore(sys.argv[1])
for i in range(300):
    store.put(ArmResult(f"{sys.argv[2]}-{i}", "baseline", "short", ok=True, output_tokens=i))
"""


def test_concurrent_writer_processes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    ResultStore(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name])
             for name in ("w1", "w2", "w3")]
    assert [p.wait(60) for p in procs] == [0, 0, 0]
    with ResultStore(path) as store:
        assert store.count() == 900


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    write_traffic(run / "traffic.jsonl", [TrafficRecord("r1", 0.0, "long", "/v1/completions",
                                                        {"prompt": "x"})])
    with ResultStore(run / "results.sqlite") as store:
        store.put(FULL)
    manifest = Manifest.new("replay", {"rate": 1.0}, {"baseline": "http://a"},
                            {"path": "traffic.jsonl", "sha256": "x", "count": 1})
    write_manifest(run, manifest.with_status("complete", {"candidate": {"ok": 1, "error": 0}}))
    scrape_path(run, "baseline", "before").parent.mkdir()
    scrape_path(run, "baseline", "before").write_text("layergate_requests_total 1\n")
    return run


def test_load_run_reads_everything(tmp_path: Path) -> None:
    run = load_run(_run_dir(tmp_path))
    assert run.complete and run.manifest.kind == "replay" and run.results == [FULL]
    assert [(s.arm, s.when) for s in run.scrapes] == [("baseline", "before")]
    assert run.traffic is not None and len(run.traffic) == 1 and run.determinism is None
    assert read_manifest(run.path).versions["layergate"]


@pytest.mark.parametrize("command", ["metrics", "gate"])
def test_an_unreadable_run_dir_exits_4_saying_what_is_wrong(tmp_path: Path,
                                                            command: str) -> None:
    from click.testing import CliRunner

    from harness.cli import main

    def says(run: Path, words: str) -> None:
        result = CliRunner().invoke(main, [command, str(run)])
        assert result.exit_code == 4, result.output  # infrastructure, not a verdict
        assert words in result.output and str(run) in result.output, result.output

    says(tmp_path / "missing", "no such run directory")
    run = _run_dir(tmp_path)
    (run / "results.sqlite").write_bytes(b"this is not sqlite" * 100)
    says(run, "results.sqlite")
    (run / "manifest.json").write_text(json.dumps({"id": "x"}))
    says(run, "missing key 'kind'")
    (run / "manifest.json").unlink()
    says(run, "not a run directory")


def test_harness_parts_import_without_torch_or_locust() -> None:
    code = ("import sys, harness.replay, harness.capture, harness.determinism, harness.rundir, "
            "harness.scenarios, harness.cli.replay, harness.cli.capture, "
            "harness.cli.determinism; "
            "print(sorted(m for m in ('torch', 'transformers', 'locust', 'gevent') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
