"""`layergate scenarios`: the bundled traffic mixes, by name."""

from __future__ import annotations

import click

from layergate.exporters import bundled
from layergate.exporters.catalogue import ExitCode
from layergate.harness.cli.exits import exits
from layergate.harness.cli.listing import echo_catalogue


@exits(ExitCode.PASS, PASS="listed")
@click.command("scenarios")
def command() -> None:
    """List the bundled traffic mixes. `replay --scenario NAME` takes a mix's name or a mix
    YAML path (schema: scenarios/README.md); `replay --traffic F` replays a traffic file
    as it is.
    """
    echo_catalogue(bundled.MIXES, "scenarios (replay --scenario NAME)")
