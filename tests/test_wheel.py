"""layergate installed as a tool: the sdist built from this checkout and the wheel built from
that sdist, the wheel installed into a fresh virtual environment with the core dependencies
only, and its commands run from an empty directory, never the checkout: the bundled
policies, mixes, dashboards and compose file come from the install. The dependencies come
from the suite's wheelhouse (fetched once per pyproject.toml by this machine's pip), so pip
resolves the wheel's own requirements offline instead of asking the index for each."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from benchmarks.rigs.echo import echo_server
from exporters.bundled import MIXES, POLICIES, names
from exporters.catalogue import ExitCode
from tests.support.wheelhouse import wheels_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
# what a copy of the checkout leaves behind: history, environments, build and run outputs
IGNORE = shutil.ignore_patterns(".git", ".venv*", "runs", "build", "dist", "*.egg-info",
                                "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis")
DATA = ("exporters/bundled/scenarios/policies/default.yaml",
        "exporters/bundled/scenarios/mixes/smoke.yaml",
        "exporters/bundled/scenarios/traffic/eval.jsonl",
        "exporters/bundled/scenarios/rules/smollm2-135m.json",
        "exporters/bundled/scenarios/watch/metric-names.yaml",
        "exporters/bundled/dashboards/grafana/ab-overview.json",
        "exporters/bundled/dashboards/provisioning/datasources/prometheus.yml",
        "exporters/bundled/dashboards/rules.yml",
        "exporters/bundled/docker-compose.yml",
        "exporters/bundled/starter/github-workflow.yml")


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _checked(cmd: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    done = _run(cmd, cwd, **kw)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@dataclass(frozen=True)
class Installed:
    sdist: Path
    wheel: Path
    venv: Path
    env: dict[str, str]  # no PYTHONPATH: nothing of the checkout on the path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def layergate(self, *args: str, cwd: Path, timeout: float = 300
                  ) -> subprocess.CompletedProcess:
        return _run([str(self.venv / "bin" / "layergate"), *args], cwd, self.env, timeout)


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("wheel")
    src, dist = work / "src", work / "dist"
    shutil.copytree(ROOT, src, symlinks=True, ignore=IGNORE)
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONPATH" and not k.startswith("LAYERGATE_")}
    # the sdist from the checkout, then the wheel from the sdist: so the sdist must carry
    # the data too (this environment's setuptools, no build isolation: nothing to fetch)
    _checked([sys.executable, "-c", "import sys, setuptools.build_meta as b; "
              "b.build_sdist(sys.argv[1])", str(dist)], src, env=env)
    sdist = next(dist.glob("layergate-*.tar.gz"))
    _checked([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
              "-w", str(dist), str(sdist)], work, env=env)
    wheel = next(dist.glob("layergate-*.whl"))
    venv = work / "venv"
    _checked([sys.executable, "-m", "venv", str(venv)], work, env=env)
    started = time.monotonic()
    _checked([str(venv / "bin" / "pip"), "install", "-q", "--no-compile",
              "--disable-pip-version-check", "--no-index", "--find-links", str(wheels_dir()),
              str(wheel)], work, env=env, timeout=900)
    print(f"\nwheel installed with its core dependencies in {time.monotonic() - started:.0f} s")
    return Installed(sdist, wheel, venv, env)


@pytest.fixture()
def empty(tmp_path: Path) -> Path:
    """An empty working directory outside the checkout."""
    (tmp_path / "cwd").mkdir()
    return tmp_path / "cwd"


def test_the_wheel_and_the_sdist_carry_the_bundled_data(installed: Installed) -> None:
    wheel = set(zipfile.ZipFile(installed.wheel).namelist())
    sdist = {n.split("/", 1)[1] for n in tarfile.open(installed.sdist).getnames() if "/" in n}
    for name in DATA:
        assert name in wheel, f"wheel lacks {name}"
        assert name in sdist, f"sdist lacks {name}"
    bundled_policies = {n for n in wheel if n.startswith("exporters/bundled/scenarios/policies/")}
    assert len(bundled_policies) == len(names(POLICIES))
    assert not [n for n in wheel if n.startswith(("scenarios/", "dashboards/", "tests/"))]


def test_core_install_has_no_torch_and_runs_from_site_packages(installed: Installed,
                                                               empty: Path) -> None:
    done = _run([installed.python, "-c", "import torch"], empty, installed.env)
    assert done.returncode != 0 and "No module named 'torch'" in done.stderr
    where = _checked([installed.python, "-c", "import exporters.bundled as b; print(b.root())"],
                     empty, env=installed.env).stdout.strip()
    assert Path(where).is_relative_to(installed.venv), where
    meta = _checked([installed.python, "-c", "from importlib.metadata import requires; "
                     "print('\\n'.join(requires('layergate')))"], empty,
                    env=installed.env).stdout.splitlines()
    torch = [r for r in meta if r.startswith("torch")]
    assert torch and all('extra == "engine"' in r for r in torch), torch


@pytest.mark.parametrize("command", ["serve", "calibrate"])
def test_engine_commands_name_the_missing_extra(installed: Installed, empty: Path,
                                                command: str) -> None:
    traffic = ROOT / "scenarios" / "traffic" / "calibration.jsonl"
    args = ["--traffic", str(traffic), "--out", "rules.json"] if command == "calibrate" else []
    done = installed.layergate(command, *args, cwd=empty)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "pip install 'layergate[engine]'" in done.stderr and "torch" in done.stderr


def test_policies_and_scenarios_list_the_bundled_names(installed: Installed,
                                                       empty: Path) -> None:
    policies = installed.layergate("policies", cwd=empty)
    assert policies.returncode == 0, policies.stderr
    for name in names(POLICIES):
        assert f"\n  {name} " in policies.stdout, name
    mixes = installed.layergate("scenarios", cwd=empty)
    assert mixes.returncode == 0, mixes.stderr
    for name in names(MIXES):
        assert f"\n  {name} " in mixes.stdout, name


@pytest.fixture(scope="module")
def echo(installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The echo server, run by the fresh venv's interpreter from an empty directory."""
    with echo_server(python=installed.python, cwd=tmp_path_factory.mktemp("echo"),
                     env=installed.env) as url:
        yield url


@pytest.fixture(scope="module")
def replayed(installed: Installed, echo: str, tmp_path_factory: pytest.TempPathFactory
             ) -> Path:
    """`replay --scenario smoke` (a bundled mix, by name) to the echo server as every arm."""
    cwd = tmp_path_factory.mktemp("replay")
    done = installed.layergate("replay", "--scenario", "smoke", "--baseline", echo,
                               "--baseline2", echo, "--candidate", echo, "--out", "run",
                               "--speed", "20", "--no-progress", "--timeout", "30", cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((cwd / "run" / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["traffic"]["count"] == 8
    return cwd / "run"


@pytest.mark.parametrize("policy", ["no-regression", None])
def test_gate_on_the_stored_run_by_name_and_by_default(installed: Installed, replayed: Path,
                                                       empty: Path, policy: str | None) -> None:
    args = ["--policy", policy] if policy else []
    done = installed.layergate("gate", str(replayed), *args, "--json", "gate.json", cwd=empty)
    # 8 requests are too few for a confident verdict: any verdict, but a verdict
    assert done.returncode in {ExitCode.PASS, ExitCode.FAIL, ExitCode.INCONCLUSIVE}, \
        done.stdout + done.stderr
    report = json.loads((empty / "gate.json").read_text())
    assert report["run"]["policy"]["name"] == (policy or "default")
    assert Path(report["run"]["policy"]["path"]).is_relative_to(installed.venv)


def test_an_unknown_policy_name_is_a_usage_error_listing_the_names(installed: Installed,
                                                                   replayed: Path,
                                                                   empty: Path) -> None:
    done = installed.layergate("gate", str(replayed), "--policy", "no-such", cwd=empty)
    assert done.returncode == ExitCode.USAGE
    assert "unknown gate policy 'no-such'" in done.stderr
    assert all(name in done.stderr for name in names(POLICIES))


def test_watch_help_and_dashboards_export(installed: Installed, empty: Path) -> None:
    watch = installed.layergate("watch", "--help", cwd=empty)
    assert watch.returncode == 0 and "--policy" in watch.stdout, watch.stderr
    done = installed.layergate("dashboards", "export", "out", cwd=empty)
    assert done.returncode == 0, done.stderr
    boards = sorted(p.name for p in (empty / "out" / "dashboards" / "grafana").glob("*.json"))
    assert boards == sorted(p.name for p in (ROOT / "dashboards" / "grafana").glob("*.json"))
    for board in boards:
        json.loads((empty / "out" / "dashboards" / "grafana" / board).read_text())
    assert yaml.safe_load((empty / "out" / "dashboards" / "rules.yml").read_text())["groups"]


def test_init_writes_a_starter_that_checks_out(installed: Installed, replayed: Path,
                                               empty: Path) -> None:
    done = installed.layergate("init", "stack", cwd=empty)
    assert done.returncode == 0, done.stderr
    stack = empty / "stack"
    compose = _run([shutil.which("docker-compose") or "docker-compose", "config", "-q"],
                   stack, installed.env)
    assert compose.returncode == 0, compose.stderr
    config = yaml.safe_load(_checked(["docker-compose", "config"], stack,
                                     env=installed.env).stdout)
    replayer = config["services"]["replayer"]
    assert replayer["environment"]["LAYERGATE_REPLAY_TRAFFIC"] == "./traffic.jsonl"
    assert config["services"]["candidate"]["profiles"] == ["engines"]
    workflow = yaml.safe_load((stack / ".github" / "workflows" / "layergate.yml").read_text())
    steps = " ".join(str(s.get("run", "")) + str(s.get("uses", ""))
                     for s in workflow["jobs"]["gate"]["steps"])
    assert "layergate replay" in steps and "layergate gate" in steps
    assert "upload-artifact" in steps and "--junit" in steps and "--markdown" in steps
    gitlab = yaml.safe_load((stack / ".gitlab-ci.yml").read_text())
    assert any("layergate gate" in line for line in gitlab["layergate-gate"]["script"])
    assert gitlab["layergate-gate"]["artifacts"]["reports"]["junit"] == "reports/junit.xml"
    # the policy to edit loads, stands alone, and gates
    gated = installed.layergate("gate", str(replayed), "--policy", "policy.yaml", "--json",
                                "g.json", cwd=stack)
    assert gated.returncode in {ExitCode.PASS, ExitCode.FAIL, ExitCode.INCONCLUSIVE}, \
        gated.stderr
    assert json.loads((stack / "g.json").read_text())["run"]["policy"]["name"] == "policy"
    # the sample traffic replays as a user's file would
    assert _run([installed.python, "-c", "import sys; from exporters.traffic import "
                 "read_traffic; print(len(read_traffic(sys.argv[1]).records))",
                 "traffic.jsonl"], stack, installed.env).stdout.strip() == "8"
    # nothing is overwritten without --force
    (stack / "policy.yaml").write_text("# mine\n")
    again = installed.layergate("init", "stack", cwd=empty)
    assert again.returncode == ExitCode.USAGE and "--force" in again.stderr
    assert (stack / "policy.yaml").read_text() == "# mine\n"
    forced = installed.layergate("init", "stack", "--force", cwd=empty)
    assert forced.returncode == 0 and (stack / "policy.yaml").read_text() != "# mine\n"


def test_the_starter_s_ci_workflow_replays_and_gates(installed: Installed, echo: str,
                                                     empty: Path) -> None:
    """The workflow's own Replay and Gate steps, run by bash in the starter with the echo
    server as the three arms (the repository variables), leave the reports to upload."""
    assert installed.layergate("init", "stack", cwd=empty).returncode == 0
    stack = empty / "stack"
    workflow = yaml.safe_load((stack / ".github" / "workflows" / "layergate.yml").read_text())
    steps = {s.get("name"): s for s in workflow["jobs"]["gate"]["steps"]}
    env = {**installed.env, "PATH": f"{installed.venv / 'bin'}:{installed.env['PATH']}"}
    for name, codes in (("Replay", {ExitCode.PASS}),
                        ("Gate", {ExitCode.PASS, ExitCode.FAIL, ExitCode.INCONCLUSIVE})):
        script = re.sub(r"\$\{\{ vars\.\w+_URL \}\}", echo, steps[name]["run"])
        done = _run(["bash", "-c", script], stack, env)
        assert done.returncode in codes, f"{name}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    uploaded = steps["Upload the reports"]["with"]["path"]
    for report in ("gate.json", "junit.xml", "report.md", "report.html"):
        assert (stack / uploaded / report).stat().st_size > 0, report
