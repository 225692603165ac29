"""`layergate calibrate`: bad input fails fast with exit 2 and a message naming the place; a
short real run on bundled calibration prompts writes its CSVs, PNGs and a loadable rules
file."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from layergate.harness.cli import main
from layergate.reference_engine.skip_policies.rules import load_rules

CALIBRATION = Path(__file__).resolve().parents[1] / "scenarios" / "traffic" / "calibration.jsonl"


def _run(*args: str):
    return CliRunner().invoke(main, ["calibrate", *args])


def test_bad_traffic_names_file_line_and_field(tmp_path):
    good = CALIBRATION.read_text().splitlines()[0]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good + "\n" + good.replace('"offset_s"', '"offset"') + "\n")
    result = _run("--traffic", str(bad), "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2
    assert "bad.jsonl:2" in result.output and "offset_s" in result.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    result = _run("--traffic", str(empty), "--out", str(tmp_path / "r.json"))
    assert result.exit_code == 2 and "no requests" in result.output
    result = _run("--traffic", str(bad), "--out", "r.json", "--gammas", "2,x")
    assert result.exit_code == 2


@pytest.mark.model
def test_short_calibration_writes_report_and_rules(tmp_path):
    out, report = tmp_path / "rules.json", tmp_path / "report"
    result = _run("--traffic", str(CALIBRATION), "--out", str(out), "--report", str(report),
                  "--max-prompts", "2", "--max-tokens", "6", "--drift-prompts", "1",
                  "--skip-counts", "1,2", "--draft-skips", "4", "--draft-exits", "",
                  "--gammas", "1,2")
    assert result.exit_code == 0, result.output
    for name in ("layers", "sweep", "speculative"):
        assert (report / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    layers = list(csv.DictReader((report / "layers.csv").open()))
    assert [int(r["layer"]) for r in layers] == list(range(30))
    assert all(0.0 <= float(r["block_influence"]) <= 2.0 for r in layers)
    assert sum(float(r["decode_share"]) for r in layers) < 1.0
    sweep = list(csv.DictReader((report / "sweep.csv").open()))
    assert {int(r["k"]) for r in sweep} == {1, 2}
    assert all(0.0 <= float(r["consistency"]) <= 1.0 for r in sweep)
    rules = load_rules(out, model="smollm2-135m", num_layers=30)
    assert rules.traffic["count"] == 2 and len(rules.traffic["sha256"]) == 64
    assert rules.speculative.skip and rules.speculative.gamma in (1, 2)
    assert "teacher-forced full depth reproduces 2/2" in result.output
    assert "speculative:" in result.output and "x of full" in result.output
