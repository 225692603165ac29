"""The files `layergate init DIR` writes: a starter a team can commit, to shadow-replay its
own traffic against its own servers and gate the candidate, locally (docker compose) and
in CI.

Everything comes from the bundled data (exporters.bundled): the stack's docker-compose.yml
(the repository's own), the Prometheus config and recording rules, the Grafana
provisioning and dashboards, the default gate policy with its `extends` chain merged in
(one file to edit), a sample traffic file (the `smoke` mix's requests) and the templates of
`starter/`: the image, the `.env` that sets the compose variables, a GitHub Actions
workflow and a GitLab CI job.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import yaml

from exporters import bundled
from exporters.traffic import dumps_record
from harness.gate.policy import flattened
from harness.scenarios import build_traffic

# the dashboards folder's files a stack mounts (its README and promtool tests stay behind)
DASHBOARD_PARTS = ("prometheus.yml", "rules.yml", "provisioning", "grafana", "rollout")
SAMPLE_MIX = "smoke"
# starter template -> where init writes it
TEMPLATES = {"Dockerfile": "Dockerfile", "env": ".env",
             "github-workflow.yml": ".github/workflows/layergate.yml",
             "gitlab-ci.yml": ".gitlab-ci.yml"}
POLICY_HEADER = ("# The gate policy of this stack: `layergate gate RUN --policy policy.yaml`.\n"
                 "# layergate's `default` with its base merged in; every key is described in\n"
                 "# layergate's docs/FORMATS.md (gate policy). Edit the thresholds to yours.\n")


class StarterExistsError(FileExistsError):
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


def starter_files() -> dict[str, bytes]:
    """Every file of the starter, by its path relative to the starter's directory."""
    files = {"docker-compose.yml": bundled.compose_file().read_bytes(),
             "policy.yaml": policy_file(), "traffic.jsonl": sample_traffic(),
             **dashboard_files()}
    for template, target in TEMPLATES.items():
        files[target] = (bundled.starter_dir() / template).read_bytes()
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
