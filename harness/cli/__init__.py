"""The `layergate` click group. Each command lives in its own module and is loaded lazily,
so `layergate --help` stays fast and only `serve` / `calibrate` (the engine's own commands,
in `reference_engine.cli`) ever reach torch."""

from __future__ import annotations

import importlib

import click

# command name -> the module exposing it as `command`. The engine's commands live with the
# engine and are named by module path only: the harness never imports `reference_engine`.
COMMANDS: dict[str, str] = {
    "serve": "reference_engine.cli.serve",
    "calibrate": "reference_engine.cli.calibrate",
    "capture": "harness.cli.capture",
    "import-trace": "harness.cli.import_trace",
    "replay": "harness.cli.replay",
    "replay-worker": "harness.cli.replay_worker",
    "capacity": "harness.cli.capacity",
    "determinism": "harness.cli.determinism",
    "metrics": "harness.cli.metrics",
    "gate": "harness.cli.gate",
    "compare": "harness.cli.compare",
    "watch": "harness.cli.watch",
    "dashboards": "harness.cli.dashboards",
    "demo": "harness.cli.demo",
    "policies": "harness.cli.policies",
    "scenarios": "harness.cli.scenarios",
    "init": "harness.cli.init",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = COMMANDS.get(name)
        if module is None:
            return None
        return importlib.import_module(module).command


@click.group(cls=LazyGroup, context_settings={"auto_envvar_prefix": "LAYERGATE",
                                               "help_option_names": ["-h", "--help"]})
@click.version_option(package_name="layergate")
def main() -> None:
    """layergate: A/B evaluation and release gating for LLM inference that runs fewer layers.

    Typical loop: `serve` a baseline and a candidate, `replay` traffic through both,
    read the figures with `metrics`, and let `gate` decide in CI; then `watch` the staged
    rollout live from Prometheus.
    """
