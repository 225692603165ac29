"""The `layergate` click group. Each command lives in its own module and is loaded lazily,
so `layergate --help` stays fast and only `serve` / `calibrate` (the engine's own commands,
in `layergate.reference_engine.cli`) ever reach torch."""

from __future__ import annotations

import importlib
from typing import Any

import click

from layergate.exporters.errors import LayergateError

# command name -> the module exposing it as `command`. The engine's commands live with the
# engine and are named by module path only: the harness never imports `reference_engine`.
COMMANDS: dict[str, str] = {
    "serve": "layergate.reference_engine.cli.serve",
    "calibrate": "layergate.reference_engine.cli.calibrate",
    "capture": "layergate.harness.cli.capture",
    "import-trace": "layergate.harness.cli.import_trace",
    "import-results": "layergate.harness.cli.import_results",
    "replay": "layergate.harness.cli.replay",
    "replay-worker": "layergate.harness.cli.replay_worker",
    "capacity": "layergate.harness.cli.capacity",
    "determinism": "layergate.harness.cli.determinism",
    "metrics": "layergate.harness.cli.metrics",
    "gate": "layergate.harness.cli.gate",
    "judge": "layergate.harness.cli.judge",
    "compare": "layergate.harness.cli.compare",
    "watch": "layergate.harness.cli.watch",
    "dashboards": "layergate.harness.cli.dashboards",
    "demo": "layergate.harness.cli.demo",
    "policies": "layergate.harness.cli.policies",
    "scenarios": "layergate.harness.cli.scenarios",
    "init": "layergate.harness.cli.init",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = COMMANDS.get(name)
        if module is None:
            return None
        return importlib.import_module(module).command

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
