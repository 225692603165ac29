"""The `layergate` click group. Each command lives in its own module and is loaded lazily,
so `layergate --help` stays fast and only `serve` / `calibrate` ever reach torch."""

from __future__ import annotations

import importlib
from typing import Any

import click

from exporters.errors import LayergateError

# command name -> module under harness.cli exposing `command`
COMMANDS: dict[str, str] = {
    "serve": "serve",
    "calibrate": "calibrate",
    "capture": "capture",
    "import-trace": "import_trace",
    "replay": "replay",
    "replay-worker": "replay_worker",
    "capacity": "capacity",
    "determinism": "determinism",
    "metrics": "metrics",
    "gate": "gate",
    "compare": "compare",
    "watch": "watch",
    "dashboards": "dashboards",
    "demo": "demo",
    "policies": "policies",
    "scenarios": "scenarios",
    "init": "init",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = COMMANDS.get(name)
        if module is None:
            return None
        return importlib.import_module(f"harness.cli.{module}").command

    def invoke(self, ctx: click.Context) -> Any:
        """The one place where an error that carries its exit code (exporters/errors.py)
        becomes a message on stderr and that code: commands never write their own."""
        try:
            return super().invoke(ctx)
        except LayergateError as exc:
            click.echo(f"{ctx.command_path} {ctx.invoked_subcommand}: error: {exc}", err=True)
            ctx.exit(exc.exit_code)


@click.group("layergate", cls=LazyGroup,
             context_settings={"auto_envvar_prefix": "LAYERGATE",
                               "help_option_names": ["-h", "--help"]})
@click.version_option(package_name="layergate")
def main() -> None:
    """layergate: A/B evaluation and release gating for LLM inference that runs fewer layers.

    Typical loop: `serve` a baseline and a candidate, `replay` traffic through both,
    read the figures with `metrics`, and let `gate` decide in CI; then `watch` the staged
    rollout live from Prometheus.
    """
