"""layergate installed as a tool: the sdist built from this checkout and the wheel built from
that sdist (tests/support/dist.py, as `make dist` builds them), the wheel installed into a
fresh virtual environment with the core dependencies only by the install step of a
starter's CI job as `layergate init --install-from WHEEL` wrote it, and its commands run
from an empty directory, never the checkout: the bundled policies, mixes, dashboards and
compose file come from the install. The starter's GitHub job runs every shell step as
written; its GitLab job installs from a git URL in a clean venv of its own. The
dependencies come from the suite's wheelhouse (fetched once per pyproject.toml by this
machine's pip): pip resolves offline (PIP_NO_INDEX, PIP_FIND_LINKS) the requirements it
would ask the index for."""

from __future__ import annotations

import json
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

from layergate.exporters.bundled import MIXES, POLICIES, names
from layergate.exporters.catalogue import ExitCode
from layergate.harness import install_source
from layergate.harness.starter import starter_files, write_files
from tests.support import dist
from tests.support.echo import echo_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.locust,
              pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parents[1]
DATA = ("layergate/exporters/bundled/scenarios/policies/default.yaml",
        "layergate/exporters/bundled/scenarios/mixes/smoke.yaml",
        "layergate/exporters/bundled/scenarios/traffic/eval.jsonl",
        "layergate/exporters/bundled/scenarios/rules/smollm2-135m.json",
        "layergate/exporters/bundled/scenarios/watch/metric-names.yaml",
        "layergate/exporters/bundled/dashboards/grafana/ab-overview.json",
        "layergate/exporters/bundled/dashboards/provisioning/datasources/prometheus.yml",
        "layergate/exporters/bundled/dashboards/rules.yml",
        "layergate/exporters/bundled/docker-compose.yml",
        "layergate/exporters/bundled/Dockerfile",
        "layergate/exporters/bundled/starter/github-workflow.yml")
WORKFLOW = ".github/workflows/layergate.yml"  # where init writes the GitHub Actions job


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
    starter: Path  # the starter whose CI job installed the venv
    venv: Path
    env: dict[str, str]  # no PYTHONPATH: nothing of the checkout on the path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    @property
    def job_env(self) -> dict[str, str]:
        """A CI job's shell in the venv (what setup-python and the install step leave)."""
        return {**self.env, "PATH": f"{self.venv / 'bin'}:{self.env['PATH']}"}

    def layergate(self, *args: str, cwd: Path, timeout: float = 300
                  ) -> subprocess.CompletedProcess:
        return _run([str(self.venv / "bin" / "layergate"), *args], cwd, self.env, timeout)


def job_steps(starter: Path) -> dict[str, dict]:
    workflow = yaml.safe_load((starter / WORKFLOW).read_text())
    return {s.get("name", s.get("uses")): s for s in workflow["jobs"]["gate"]["steps"]}


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel `make dist` builds, in a starter written for it (`init --install-from
    WHEEL`), installed into a fresh venv by the starter's own CI install step, as written."""
    built = dist.built()
    work = tmp_path_factory.mktemp("wheel")
    starter = work / "starter"
    write_files(starter, starter_files(install_source.given(str(built.wheel))))
    venv = work / "venv"  # what actions/setup-python gives the job: a clean Python
    env = dist.offline_env()
    _checked([sys.executable, "-m", "venv", str(venv)], work, env=env)
    step = job_steps(starter)["Install layergate (the harness only, no torch)"]["run"]
    assert f"./wheels/{built.wheel.name}" in step, step
    started = time.monotonic()
    _checked(["bash", "-e", "-c", step], starter, timeout=900,
             env={**env, "PATH": f"{venv / 'bin'}:{env['PATH']}"})
    print(f"\nwheel installed by the starter's CI step in {time.monotonic() - started:.0f} s")
    return Installed(built.sdist, built.wheel, starter, venv, env)


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
    policies = "layergate/exporters/bundled/scenarios/policies/"
    bundled_policies = {n for n in wheel if n.startswith(policies)}
    assert len(bundled_policies) == len(names(POLICIES))
    assert not [n for n in wheel if n.startswith(("scenarios/", "dashboards/", "tests/"))]


def test_core_install_has_no_torch_and_runs_from_site_packages(installed: Installed,
                                                               empty: Path) -> None:
    done = _run([installed.python, "-c", "import torch"], empty, installed.env)
    assert done.returncode != 0 and "No module named 'torch'" in done.stderr
    where = _checked([installed.python, "-c", "from layergate.exporters import bundled as b; "
                      "print(b.root())"], empty, env=installed.env).stdout.strip()
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
    assert _run([installed.python, "-c", "import sys; from layergate.exporters.traffic import "
                 "read_traffic; print(len(read_traffic(sys.argv[1]).records))",
                 "traffic.jsonl"], stack, installed.env).stdout.strip() == "8"
    # nothing is overwritten without --force
    (stack / "policy.yaml").write_text("# mine\n")
    again = installed.layergate("init", "stack", cwd=empty)
    assert again.returncode == ExitCode.USAGE and "--force" in again.stderr
    assert (stack / "policy.yaml").read_text() == "# mine\n"
    forced = installed.layergate("init", "stack", "--force", cwd=empty)
    assert forced.returncode == 0 and (stack / "policy.yaml").read_text() != "# mine\n"


def test_the_starter_s_github_job_runs_as_written(installed: Installed, echo: str,
                                                  tmp_path: Path) -> None:
    """Every shell step of the workflow after the install (which made the venv), run by
    bash in the starter as GitHub runs them (`bash -e`, `if: always()` steps after a
    failure too), with the echo server as the three arms (the repository variables)."""
    summary = tmp_path / "summary.md"
    env = {**installed.job_env, "GITHUB_STEP_SUMMARY": str(summary)}
    failed = False
    ran = []
    for name, step in job_steps(installed.starter).items():
        if "run" not in step or name.startswith("Install layergate"):
            continue
        if failed and step.get("if") != "always()":
            continue
        script = re.sub(r"\$\{\{ vars\.\w+_URL \}\}", echo, step["run"])
        done = _run(["bash", "-e", "-c", script], installed.starter, env)
        ran.append((name, done.returncode))
        # the job's result is the gate's: 8 requests may well be inconclusive
        allowed = ({ExitCode.PASS, ExitCode.FAIL, ExitCode.INCONCLUSIVE} if name == "Gate"
                   else {ExitCode.PASS})
        assert done.returncode in allowed, f"{name}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        failed = failed or done.returncode != 0
    assert [n for n, _ in ran] == ["Replay", "Gate", "Summary"], ran
    uploaded = job_steps(installed.starter)["Upload the reports"]["with"]["path"]
    for report in ("gate.json", "junit.xml", "report.md", "report.html"):
        assert (installed.starter / uploaded / report).stat().st_size > 0, report
    assert "layergate" in summary.read_text()


def test_the_starter_s_gitlab_job_installs_from_git_and_gates(installed: Installed, echo: str,
                                                              tmp_path: Path) -> None:
    """`init --install-from git+file://localhost/…@COMMIT` (this repository's history, a git URL
    pip clones): the GitLab job's script, line by line in `sh -e` as the runner runs it, in
    a clean venv of its own that only the job's install fills."""
    head = _checked(["git", "rev-parse", "HEAD"], ROOT).stdout.strip()
    # a host in the URL: the pip of a fresh venv (23.2) refuses a PEP 508 URL with none
    url = f"git+file://localhost{ROOT}@{head}"
    done = installed.layergate("init", "stack", "--install-from", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"layergate @ {url}" in done.stdout, done.stdout
    stack = tmp_path / "stack"
    assert not (stack / "wheels").exists()
    assert f'ARG LAYERGATE_INSTALL="layergate[engine] @ {url}"' in (
        stack / "Dockerfile").read_text()
    venv = tmp_path / "venv"
    _checked([sys.executable, "-m", "venv", str(venv)], tmp_path, env=installed.env)
    env = {**installed.env, "PATH": f"{venv / 'bin'}:{installed.env['PATH']}",
           "BASELINE_URL": echo, "BASELINE2_URL": echo, "CANDIDATE_URL": echo}
    job = yaml.safe_load((stack / ".gitlab-ci.yml").read_text())["layergate-gate"]
    for line in job["script"]:
        done = _run(["sh", "-e", "-c", line], stack, env, timeout=900)
        gate = line.lstrip().startswith("layergate gate")
        allowed = {ExitCode.PASS, ExitCode.FAIL, ExitCode.INCONCLUSIVE} if gate else {0}
        assert done.returncode in allowed, f"{line}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    where = _checked([str(venv / "bin" / "python"), "-c", "import json, importlib.metadata as m; "
                      "print(json.loads(m.distribution('layergate').read_text('direct_url.json'))"
                      "['vcs_info']['commit_id'])"], tmp_path, env=installed.env)
    assert where.stdout.strip() == head
    for report in job["artifacts"]["paths"]:
        assert sorted(p.name for p in (stack / report).iterdir()) == [
            "gate.json", "junit.xml", "report.html", "report.md"]


def test_init_writes_the_source_it_was_installed_from(installed: Installed,
                                                      tmp_path: Path) -> None:
    """No --install-from: the wheel this venv was installed from (its direct_url.json)
    travels in the starter, and every install line names it."""
    done = installed.layergate("init", "stack", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    stack = tmp_path / "stack"
    wheel = stack / "wheels" / installed.wheel.name
    assert wheel.read_bytes() == installed.wheel.read_bytes()
    requirement = f"./wheels/{installed.wheel.name}"
    assert requirement in job_steps(stack)["Install layergate (the harness only, no torch)"][
        "run"]
    assert f"pip install '{requirement}'" in (stack / ".gitlab-ci.yml").read_text()
    assert f'ARG LAYERGATE_INSTALL="{requirement}[engine]"' in (stack / "Dockerfile").read_text()


def test_the_install_occupies_no_name_but_layergate(installed: Installed) -> None:
    """site-packages gets one package, `layergate` (with its dist-info), and the command."""
    record = _checked([installed.python, "-c", "import importlib.metadata as m; "
                       "print('\\n'.join(str(f) for f in m.distribution('layergate').files))"],
                      installed.venv, env=installed.env).stdout.split()
    tops = {f.split("/")[0] for f in record if not f.startswith("..")}
    assert tops == {"layergate", f"layergate-{installed.wheel.name.split('-')[1]}.dist-info"}, \
        tops


def test_pipx_installs_the_checkout_as_a_tool(installed: Installed, tmp_path: Path) -> None:
    """`pipx install .` from a copy of the checkout (docs/CLI.md, "Install"): the command
    on pipx's bin directory, the bundled data from its own venv."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=dist.IGNORE)
    env = {**dist.offline_env(), "PIPX_HOME": str(tmp_path / "pipx"),
           "PIPX_BIN_DIR": str(tmp_path / "bin"), "PIPX_MAN_DIR": str(tmp_path / "man")}
    pipx = Path(sys.executable).with_name("pipx")
    _checked([str(pipx), "install", str(src)], tmp_path, env=env, timeout=900)
    command = tmp_path / "bin" / "layergate"
    listed = _checked([str(command), "policies"], tmp_path, env=env).stdout
    assert all(f"\n  {name} " in listed for name in names(POLICIES)), listed
    version = _checked([str(command), "--version"], tmp_path, env=env).stdout
    assert installed.wheel.name.split("-")[1] in version
