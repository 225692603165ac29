"""`layergate dashboards push`: upload the dashboards and the datasource to a Grafana."""

from __future__ import annotations

from pathlib import Path

import click

from layergate.exporters.catalogue import ExitCode
from layergate.harness.cli.exits import exits
from layergate.harness.cli.written import force_option, write_or_refuse


@click.group(name="dashboards")
def command() -> None:
    """Grafana dashboards of layergate (A/B overview, Latency, Layer skipping, Engine).

    docker-compose provisions them; `push` uploads them to a Grafana you already run;
    `export` writes them, with the Prometheus config and recording rules, into a folder.
    """


@exits(ExitCode.PASS, ExitCode.USAGE, PASS="written", USAGE="files exist (without --force)")
@command.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@force_option
def export(directory: Path, force: bool) -> None:
    """Write DIRECTORY/dashboards/: the Grafana dashboards (grafana/*.json) and provisioning,
    Prometheus's config and recording rules (prometheus.yml, rules.yml), and the rollout
    manifests, as docker-compose.yml mounts them.
    """
    from layergate.harness.starter import dashboard_files

    written = write_or_refuse(directory, dashboard_files(), force)
    click.echo(f"wrote {len(written)} files into {directory / 'dashboards'}")


@exits(ExitCode.PASS, ExitCode.USAGE, ExitCode.INFRASTRUCTURE, PASS="uploaded",
       INFRASTRUCTURE="Grafana unreachable or credentials refused")
@command.command()
@click.option("--grafana-url", required=True, metavar="URL",
              help="Base URL of Grafana, e.g. http://localhost:3000.")
@click.option("--api-key", metavar="KEY", help="Service-account token or API key.")
@click.option("--user", metavar="NAME", help="Basic-auth user (with --password).")
@click.option("--password", metavar="PASSWORD", help="Basic-auth password.")
@click.option("--prometheus-url", metavar="URL",
              help="Prometheus URL as Grafana sees it [default: the provisioned "
                   "http://prometheus:9090].")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="Seconds per HTTP request to Grafana.")
def push(grafana_url: str, api_key: str | None, user: str | None, password: str | None,
         prometheus_url: str | None, timeout: float) -> None:
    """Upload the Prometheus datasource (uid layergate-prometheus) and every dashboard
    into the folder `layergate`, overwriting earlier versions.
    """
    from layergate.harness.stack.grafana_push import push_dashboards

    if not grafana_url.startswith(("http://", "https://")):
        raise click.BadParameter("must start with http:// or https://",
                                 param_hint="--grafana-url")
    if api_key and (user or password):
        raise click.UsageError("give either --api-key or --user/--password, not both")
    if bool(user) != bool(password):
        raise click.UsageError("--user and --password go together")
    credential: str | tuple[str, str] | None = api_key or ((user, password) if user else None)
    result = push_dashboards(grafana_url, credential, prometheus_url, timeout,
                             on_upload=lambda t: click.echo(f"uploaded {t}"))
    click.echo(f"datasource {result.datasource_uid} and {len(result.dashboards)} dashboards "
               f"pushed to {grafana_url}")
    for url in result.urls:
        click.echo(f"  {url}")
