"""The files `layergate init DIR` writes: a starter a team can commit, to shadow-replay its
own traffic against its own servers and gate the candidate, locally (docker compose) and
in CI.

Everything comes from the bundled data (layergate.exporters.bundled): the stack's docker-compose.yml
(the repository's own), the Prometheus config and recording rules, the Grafana
provisioning and dashboards, the default gate policy with its `extends` chain merged in
(one file to edit), a sample traffic file (the `smoke` mix's requests) and the templates of
`starter/`: the `.env` that sets the compose variables, a GitHub Actions workflow and a
GitLab CI job; and the image's Dockerfile (the repository's own). The CI jobs and the
Dockerfile install layergate from one source (harness/install_source.py), written in where
the templates say REQUIREMENT; a file source travels in the starter's wheels/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import yaml

from layergate.exporters import bundled
from layergate.exporters.errors import UsageError
from layergate.exporters.traffic import dumps_record
from layergate.harness.gate import flattened
from layergate.harness.install_source import InstallSource
from layergate.harness.scenarios import build_traffic

# the dashboards folder's files a stack mounts (its README and promtool tests stay behind)
DASHBOARD_PARTS = ("prometheus.yml", "rules.yml", "provisioning", "grafana", "rollout")
SAMPLE_MIX = "smoke"
# starter template -> where init writes it
TEMPLATES = {"env": ".env", "dockerignore": ".dockerignore",
             "github-workflow.yml": ".github/workflows/layergate.yml",
             "gitlab-ci.yml": ".gitlab-ci.yml"}
REQUIREMENT = "@REQUIREMENT@"  # in a template: the requirement of the harness (no extras)
# the Dockerfile's line that names the requirement, with the engine extra
DOCKER_ARG = 'ARG LAYERGATE_INSTALL=".[engine]"\n'

POLICY_HEADER = ("# The gate policy of this stack: `layergate gate RUN --policy policy.yaml`.\n"
                 "# layergate's `default` with its base merged in; every key is described in\n"
                 "# layergate's docs/FORMATS.md (gate policy). Edit the thresholds to yours.\n")


class StarterExistsError(UsageError, FileExistsError):
    """Files that init would overwrite; names them."""


def _tree(root: Path, under: str) -> Iterator[tuple[str, bytes]]:
    base = root / under
    if base.is_file():
        yield under, base.read_bytes()
        return
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        yield f"{under}/{path.relative_to(base).as_posix()}", path.read_bytes()


def dashboard_files() -> dict[str, bytes]:
    """dashboards/...: Prometheus config and rules, Grafana provisioning and dashboards."""
    root = bundled.dashboards_dir()
    return {f"dashboards/{name}": data for part in DASHBOARD_PARTS
            for name, data in _tree(root, part)}


def policy_file() -> bytes:
    raw = {**flattened("default"), "name": "policy",
           "description": "This stack's gate policy, from layergate's default."}
    return (POLICY_HEADER + yaml.safe_dump(raw, sort_keys=False)).encode()


def sample_traffic() -> bytes:
    return "".join(dumps_record(r) + "\n" for r in build_traffic(SAMPLE_MIX)).encode()


def dockerfile(source: InstallSource) -> bytes:
    """The repository's Dockerfile, installing layergate (with its engine) from `source`."""
    text = bundled.dockerfile().read_text(encoding="utf-8")
    if DOCKER_ARG not in text:  # the Dockerfile and this module disagree: a packaging bug
        raise RuntimeError(f"the bundled Dockerfile has no line {DOCKER_ARG.strip()!r}")
    requirement = source.requirement("[engine]").replace('"', '\\"')
    return text.replace(DOCKER_ARG, f'ARG LAYERGATE_INSTALL="{requirement}"\n').encode()


def starter_files(source: InstallSource) -> dict[str, bytes]:
    """Every file of the starter, by its path relative to the starter's directory, with
    layergate installed from `source`."""
    files = {"docker-compose.yml": bundled.compose_file().read_bytes(),
             "Dockerfile": dockerfile(source), "policy.yaml": policy_file(),
             "traffic.jsonl": sample_traffic(), **dashboard_files(), **source.files()}
    requirement = source.requirement().replace("'", "'\\''")
    for template, target in TEMPLATES.items():
        text = (bundled.starter_dir() / template).read_text(encoding="utf-8")
        files[target] = text.replace(REQUIREMENT, f"'{requirement}'").encode()
    return files


def write_files(directory: Path, files: dict[str, bytes], force: bool = False) -> list[Path]:
    """Write `files` under `directory`; with existing ones and no `force`, nothing is written
    and StarterExistsError names them."""
    targets = {directory / name: data for name, data in files.items()}
    existing = sorted(str(p) for p in targets if p.exists())
    if existing and not force:
        raise StarterExistsError(f"{len(existing)} file(s) exist (--force overwrites): "
                                 + ", ".join(existing))
    for path, data in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return sorted(targets)
