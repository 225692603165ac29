"""`layergate init DIR`: write a starter stack a team can commit (harness/starter.py)."""

from __future__ import annotations

from pathlib import Path

import click

from layergate.exporters.catalogue import ExitCode
from layergate.harness.cli.exits import exits
from layergate.harness.cli.written import force_option, write_or_refuse


@exits(ExitCode.PASS, ExitCode.USAGE, PASS="written", USAGE="files exist (without --force)")
@click.command("init")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@force_option
@click.option("--install-from", "install_from", metavar="SOURCE",
              help="Where the starter's CI jobs and image install layergate from: a version "
                   "on your package index (0.1.0), a wheel or sdist file (copied into "
                   "wheels/) or a git URL (git+https://host/repo.git@ref). Default: where "
                   "this layergate was installed from; an install from a directory has none "
                   "a CI runner can reach, and must name one.")
def command(directory: Path, force: bool, install_from: str | None) -> None:
    """Write a starter into DIRECTORY: shadow-replay your traffic against your servers and
    gate the candidate, with docker compose and in CI.

    \b
    docker-compose.yml   the stack: replay, Prometheus, Grafana, exporter, gate; the
                         reference engines under the `engines` profile
    .env                 its settings: TRAFFIC, POLICY, BASELINE_URL, BASELINE2_URL,
                         CANDIDATE_URL, COMPOSE_PROFILES, GRAFANA_ADMIN_PASSWORD
    Dockerfile           the image: layergate[engine] and the model, CPU torch
    wheels/              the wheel or sdist, when --install-from names a file
    dashboards/          Prometheus config and rules, Grafana provisioning and dashboards
    policy.yaml          the gate policy to edit
    traffic.jsonl        a sample (8 requests): replace it with your capture
    .github/workflows/layergate.yml, .gitlab-ci.yml   replay, then gate, reports uploaded

    Nothing is overwritten unless --force is given.
    """
    from layergate.harness import install_source
    from layergate.harness.starter import starter_files

    source = (install_source.given(install_from) if install_from
              else install_source.installed())
    written = write_or_refuse(directory, starter_files(source), force)
    click.echo(f"wrote {len(written)} files into {directory}")
    click.echo(f"layergate installs from {source.requirement()} ({source.origin})")
    click.echo("next: edit .env (your servers' URLs) and dashboards/prometheus.yml (their "
               "targets), put your traffic in traffic.jsonl, then\n"
               f"  cd {directory} && docker compose up --build\n"
               "  docker compose run --rm gate")
