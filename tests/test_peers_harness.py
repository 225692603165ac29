"""The harness of the side-by-side with the peers (benchmarks/peers/): the truth read from
the echo server's own timeline, layergate's figures read from what it wrote, each error
against the truth, and a peer's venv made once from its recipe and remade when it changes."""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import httpx
import pytest

from benchmarks.peers import layergate as lg_peer
from benchmarks.peers import venvs
from benchmarks.peers.common import Measured, read_truth
from benchmarks.peers.errors import Row
from tests.support.echo import echo_server

RECORDED = Path(__file__).parent / "fixtures" / "recorded"


def test_the_truth_is_what_the_server_saw(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline.jsonl"
    with echo_server("--token-delay", "0.02", "--first-token-delay", "0.1",
                     "--timeline", str(timeline)) as url:
        for _ in range(3):
            with httpx.stream("POST", f"{url}/v1/completions", timeout=10,
                              json={"prompt": "a b", "max_tokens": 5, "stream": True}) as r:
                for _ in r.iter_lines():
                    pass
    truth = read_truth(timeline)
    assert truth.requests == 3
    # the server's own pacing: 0.1 s to the first token, 0.02 s a token after it
    assert 0.1 <= truth.ttft[50] < 0.13 and 0.02 <= truth.itl[50] < 0.03
    assert truth.e2e[99] >= 0.1 + 4 * 0.02
    assert read_truth(timeline, since=truth.arrivals[-1]).requests == 1


def test_layergate_is_read_from_the_figures_it_wrote(tmp_path: Path) -> None:
    figures = RECORDED / "golden" / "metrics-same" / "figures.json"
    got = lg_peer.parse(figures, RECORDED / "same" / "manifest.json", 1.2, 3.0, 40)
    baseline = {f["name"]: f["value"] for f in json.loads(figures.read_text())["figures"]
                if f["arm"] == "baseline" and f["scenario"] == "all"}
    assert got.ttft == {50: baseline["ttft_p50"], 90: baseline["ttft_p90"],
                        99: baseline["ttft_p99"]}
    assert got.e2e[99] == baseline["e2e_p99"] and got.itl[90] == baseline["itl_p90"]
    assert got.ok == 120 and got.cpu_s == 1.2  # three arms of 40
    broken = tmp_path / "figures.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match=str(broken)):
        lg_peer.parse(broken, RECORDED / "same" / "manifest.json", 0, 0, 1)


def test_each_error_is_the_tool_less_the_truth(tmp_path: Path) -> None:
    timeline = tmp_path / "t.jsonl"
    timeline.write_text("".join(json.dumps({"arrived": 10.0 + i, "first": 10.1 + i,
                                            "last": 10.4 + i, "tokens": 16, "waited": 0})
                                + "\n" for i in range(5)))
    truth = read_truth(timeline)
    measured = Measured("x", {50: 0.105, 90: 0.11, 99: 0.12}, {50: 0.02}, {}, 5, 0.5, 1.0,
                        tmp_path)
    errors = Row("x", 2.0, measured, truth).errors_ms("ttft")
    assert errors[50] == pytest.approx(5.0, abs=1e-6)
    assert Row("x", 2.0, measured, truth).errors_ms("e2e") == {50: None, 90: None, 99: None}


def test_a_peer_venv_is_made_once_and_again_when_its_recipe_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERGATE_CACHE", str(tmp_path))
    made: list[Path] = []
    adapter = types.SimpleNamespace(TOOL="fake", VERSION="1", INSTALL=[],
                                    prepare=lambda venv: made.append(venv))
    venv = venvs.ensure(adapter, log=lambda *_: None)
    assert (venv / "bin" / "python").exists() and made == [venv]
    assert venvs.ensure(adapter, log=lambda *_: None) == venv and len(made) == 1
    adapter.INSTALL = [["--no-index", "--find-links", str(tmp_path), "--requirement", str(
        _empty_requirements(tmp_path))]]  # another recipe: made from scratch
    (venv / "leftover").write_text("x")
    venvs.ensure(adapter, log=lambda *_: None)
    assert len(made) == 2 and not (venv / "leftover").exists()
    shutil.rmtree(tmp_path / "peers")


def _empty_requirements(where: Path) -> Path:
    path = where / "requirements.txt"
    path.write_text("# nothing to install\n")
    return path
