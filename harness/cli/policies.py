"""`layergate policies`: the bundled gate and watch policies, by name."""

from __future__ import annotations

import click

from layergate.exporters import bundled
from layergate.exporters.catalogue import ExitCode
from layergate.harness.cli.exits import exits
from layergate.harness.cli.listing import echo_catalogue


@exits(ExitCode.PASS, PASS="listed")
@click.command("policies")
def command() -> None:
    """List the bundled policies. `gate --policy NAME` (also `metrics --policy`,
    `replay --until-decided`) takes a gate policy's name, `watch --policy NAME` a watch
    policy's; either also takes a YAML file path. `layergate init` writes one to edit.
    """
    echo_catalogue(bundled.POLICIES, "gate policies (gate --policy NAME; default: default)")
    click.echo()
    echo_catalogue(bundled.WATCH_POLICIES,
                   "watch policies (watch --policy NAME; default: no-regression)")
