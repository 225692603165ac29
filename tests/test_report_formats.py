"""Reports go through their registries (harness/report/formats.py): every format of the
gate's is written for a family of one (as the one-candidate report it always was) and for
a family of several; a registry refuses a name twice and names an unwritable path's
option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layergate.harness.gate.fixed.family import FamilyResult, evaluate_family
from layergate.harness.gate.policy import load_policy
from layergate.harness.report import formats
from layergate.harness.report.json_report import to_dict
from layergate.harness.report.registry import Reports, ReportWriteError
from layergate.harness.rundir import load_run
from tests.support.synthetic_run import write_run

SEVERAL = ("fast", "safe")


@pytest.fixture(scope="module")
def families(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FamilyResult]:
    tmp = tmp_path_factory.mktemp("families")
    policy = load_policy(None)
    return {size: evaluate_family(load_run(write_run(tmp / size, 60, names).path), policy)
            for size, names in (("one", ("candidate",)), ("several", SEVERAL))}


@pytest.mark.parametrize("size", ["one", "several"])
@pytest.mark.parametrize("name", formats.GATE.names())
def test_every_gate_format_is_written_for_a_family(name: str, size: str, tmp_path: Path,
                                                   families: dict[str, FamilyResult]) -> None:
    family = families[size]
    path = tmp_path / f"report.{name}"
    heard: list[Path] = []
    assert formats.GATE.write(family, {name: path}, wrote=heard.append) == {name: path}
    assert heard == [path]
    text = path.read_text(encoding="utf-8").lower()
    if size == "one":  # a family of one is its candidate's own report: no leaderboard
        assert family.only is not None and "leaderboard" not in text
    else:
        assert family.only is None and all(n in text for n in SEVERAL)


def test_a_family_of_one_writes_the_one_candidate_json(
        families: dict[str, FamilyResult], tmp_path: Path) -> None:
    family = families["one"]
    formats.GATE.write(family, {"json": tmp_path / "gate.json", "junit": None})
    assert json.loads((tmp_path / "gate.json").read_text()) == json.loads(
        json.dumps(to_dict(family.only)))
    assert not (tmp_path / "junit").exists()


def test_a_registry_refuses_a_name_twice_and_names_an_unknown_one() -> None:
    reports: Reports[object] = Reports("test")
    reports.register("json")(lambda result, path: path)
    with pytest.raises(ValueError, match="registered twice"):
        reports.register("json")(lambda result, path: path)
    with pytest.raises(ValueError, match="did you mean 'json'"):
        reports.writer("jsn")


def test_an_unwritable_path_is_a_usage_error_naming_its_option(
        families: dict[str, FamilyResult], tmp_path: Path) -> None:
    with pytest.raises(ReportWriteError, match=r"^--markdown: cannot write .*nowhere"):
        formats.GATE.write(families["one"], {"markdown": tmp_path / "nowhere" / "r.md"})
