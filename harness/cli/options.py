"""Options several commands take, each declared once: one flag, one type, one help. What a
command does with the value its own docstring says."""

from __future__ import annotations

from pathlib import Path

import click

from layergate.harness.gate import POLICY_HELP

policy_option = click.option("--policy", "policy_path",
                             type=click.Path(dir_okay=False, path_type=Path), help=POLICY_HELP)
