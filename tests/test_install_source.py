"""Where a starter installs layergate from (harness/install_source.py): what --install-from
takes, what each source writes into the CI jobs and the Dockerfile, and the refusal of a
source a CI runner cannot reach (this suite's own editable install, from a directory).
tests/test_wheel.py runs the jobs so written; the compose stack test builds the image."""

from __future__ import annotations

import json
from importlib.metadata import distributions
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from layergate.exporters.catalogue import ExitCode
from layergate.harness import install_source
from layergate.harness.cli import main
from layergate.harness.install_source import InstallSource, InstallSourceError
from layergate.harness.starter import starter_files

INSTALL_STEP = "Install layergate (the harness only, no torch)"


def _written(source: InstallSource) -> tuple[str, str, str]:
    files = starter_files(source)
    workflow = yaml.safe_load(files[".github/workflows/layergate.yml"])
    steps = {s.get("name"): s for s in workflow["jobs"]["gate"]["steps"]}
    gitlab = yaml.safe_load(files[".gitlab-ci.yml"])["layergate-gate"]["script"]
    arg = next(line for line in files["Dockerfile"].decode().splitlines()
               if line.startswith("ARG LAYERGATE_INSTALL="))
    return steps[INSTALL_STEP]["run"], gitlab[0], arg


@pytest.mark.parametrize(("value", "job", "image"), [
    ("0.1.0", "pip install 'layergate==0.1.0'", 'ARG LAYERGATE_INSTALL="layergate[engine]==0.1.0"'),
    ("layergate==0.2.1", "pip install 'layergate==0.2.1'",
     'ARG LAYERGATE_INSTALL="layergate[engine]==0.2.1"'),
    ("git+https://example.org/team/layergate.git@v0.1.0",
     "pip install 'layergate @ git+https://example.org/team/layergate.git@v0.1.0'",
     'ARG LAYERGATE_INSTALL="layergate[engine] @ git+https://example.org/team/layergate.git'
     '@v0.1.0"'),
])
def test_each_source_is_one_requirement_everywhere(value: str, job: str, image: str) -> None:
    github, gitlab, arg = _written(install_source.given(value))
    assert github == job and gitlab == job
    assert arg == image


def test_a_wheel_travels_in_the_starter(tmp_path: Path) -> None:
    wheel = tmp_path / "layergate-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK fake")
    source = install_source.given(str(wheel))
    files = starter_files(source)
    assert files["wheels/layergate-0.1.0-py3-none-any.whl"] == b"PK fake"
    github, gitlab, arg = _written(source)
    assert github == gitlab == "pip install './wheels/layergate-0.1.0-py3-none-any.whl'"
    assert arg == 'ARG LAYERGATE_INSTALL="./wheels/layergate-0.1.0-py3-none-any.whl[engine]"'


@pytest.mark.parametrize(("value", "says"), [
    ("latest", "none of a version"),
    ("./missing/layergate-0.1.0-py3-none-any.whl", "no such file"),
])
def test_a_source_that_cannot_install_is_a_usage_error(value: str, says: str) -> None:
    with pytest.raises(InstallSourceError, match=says):
        install_source.given(value)


def test_init_from_a_directory_install_asks_for_a_source(tmp_path: Path) -> None:
    """This suite runs an editable install: its directory is no source for a CI runner."""
    records = [d.read_text("direct_url.json") for d in distributions(name="layergate")]
    assert any("dir_info" in json.loads(r) for r in records if r)
    done = CliRunner().invoke(main, ["init", str(tmp_path / "out")])
    assert done.exit_code == ExitCode.USAGE, done.output
    assert "--install-from" in done.output and "make dist" in done.output
    assert not (tmp_path / "out").exists()


def test_init_names_the_source_it_wrote(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["init", str(tmp_path / "out"), "--install-from", "0.1.0"])
    assert done.exit_code == 0, done.output
    assert "layergate installs from layergate==0.1.0 (--install-from)" in done.output
