"""benchmarks/peers/vllm_bench.py reads what `vllm bench serve` and `vllm bench sweep serve`
wrote: recorded runs against the echo server (tests/fixtures/peers/vllm-bench/: a Poisson run
of 30 requests at 4 req/s, a sweep of 4 and 16 req/s with --goodput ttft:150 e2el:430, and
the 6-row mooncake trace replayed), and a clear error naming the file when one is missing
or broken. The tool itself is not needed."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from benchmarks.peers import vllm_bench
from benchmarks.peers.common import Load, OutputError

RECORDED = Path(__file__).resolve().parent / "fixtures" / "peers" / "vllm-bench"
RESULT = RECORDED / "result.json"


def test_a_recorded_run_reads_into_the_figures_the_file_holds() -> None:
    got = vllm_bench.measured(RESULT, cpu_s=8.5, wall_s=20.7)
    # the file's p50/p90/p99_{ttft,itl,e2el}_ms, read by hand, in seconds
    assert got.ttft == pytest.approx({50: 0.10257290, 90: 0.10326667, 99: 0.10444275})
    assert got.itl == pytest.approx({50: 0.02054777, 90: 0.02094850, 99: 0.02184610})
    assert got.e2e == pytest.approx({50: 0.41129979, 90: 0.41533549, 99: 0.41683681})
    assert (got.tool, got.ok, got.cpu_s, got.wall_s, got.raw) == (
        "vllm-bench", 30, 8.5, 20.7, RESULT)
    assert got.notes[0].startswith("arrivals: Poisson at 4.0 req/s")
    # TPOT stays in the notes: the tool counted 1315 tokens with its tokenizer, not 30 x 16
    assert "1315 in all" in got.notes[3] and "p50 12.11 ms" in got.notes[3]
    assert got.notes[-1] == "failed: 0"


def test_a_replayed_trace_says_its_arrivals_are_the_traces() -> None:
    got = vllm_bench.measured(RECORDED / "trace" / "result.json", 1.0, 3.0)
    assert got.ok == 6 and got.e2e[50] == pytest.approx(0.17509679)
    assert got.notes[0] == "arrivals: the trace's own timestamps"


def test_a_sweep_reads_into_one_point_per_rate() -> None:
    points = vllm_bench.sweep_points(RECORDED / "sweep" / "slo")
    assert [(p.rate, p.completed, p.failed) for p in points] == [(4.0, 20, 0), (16.0, 20, 0)]
    assert points[0].goodput == pytest.approx(3.32027093)
    assert points[0].throughput == pytest.approx(3.68918992)
    assert points[1].goodput == pytest.approx(11.94999750)


def test_a_missing_result_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match=str(tmp_path / "result.json")):
        vllm_bench.measured(tmp_path / "result.json", 0.0, 0.0)
    with pytest.raises(FileNotFoundError, match="no run=N.json under"):
        vllm_bench.sweep_points(tmp_path)


@pytest.mark.parametrize(("text", "says"), [
    ('{"completed": 30, "p50_ttft', "not readable as vllm bench serve's JSON"),
    ("[1, 2]", "a list, not vllm's result object"),
    ('{"p50_ttft_ms": 1}', "no 'completed' count"),
])
def test_a_broken_result_names_the_file(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "result.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"{path}: {says}"):
        vllm_bench.measured(path, 0.0, 0.0)


def test_a_result_without_the_asked_percentiles_names_what_is_missing(tmp_path: Path) -> None:
    # the tool's default is --metric-percentiles 99 only
    result = json.loads(RESULT.read_text())
    for metric in ("ttft", "tpot", "itl", "e2el"):
        del result[f"p50_{metric}_ms"], result[f"p90_{metric}_ms"]
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    with pytest.raises(ValueError, match=f"{path}: no p50_tpot_ms, p90_tpot_ms"):
        vllm_bench.measured(path, 0.0, 0.0)


def test_the_shim_declares_vllm_as_the_cpu_build(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    info = vllm_bench.write_vllm_shim(tmp_path)
    dist = next(importlib.metadata.distributions(path=[str(site)]))
    assert (dist.metadata["Name"], dist.version) == ("vllm", "0.32.0+cpu")
    assert sorted(f.name for f in dist.files) == ["INSTALLER", "METADATA", "RECORD"]
    assert info.parent == site


def test_the_install_pins_the_cpu_torch_first_and_the_command_streams_completions() -> None:
    assert vllm_bench.INSTALL[0] == ["torch==2.13.0+cpu"]
    assert "torch==2.13.0+cpu" in vllm_bench.INSTALL[1]
    load = Load(url="http://127.0.0.1:9", model="echo", rate=2.0, requests=60,
                prompt_tokens=32, output_tokens=16, tokenizer=Path("/tok"))
    cmd = vllm_bench.bench_args(load, Path("/venv"))
    flags = dict(zip(cmd, cmd[1:], strict=False))
    assert cmd[:3] == ["/venv/bin/vllm", "bench", "serve"]
    assert {k: flags[k] for k in ("--backend", "--endpoint", "--request-rate", "--burstiness",
                                  "--metric-percentiles")} == {
        "--backend": "openai", "--endpoint": "/v1/completions", "--request-rate": "2.0",
        "--burstiness": "1.0", "--metric-percentiles": "50,90,99"}
    assert "--ignore-eos" in cmd
