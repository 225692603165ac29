"""Options several commands take, each declared once: one flag, one type, one help. What a
command does with the value its own docstring says. `arm_options` are the arms' URLs and
models of the commands that send to a baseline, baseline2 and candidates (`replay`,
`capacity`); `arms_and_models` reads them back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import (
    ARM_ROLES,
    CANDIDATE,
    REFERENCE_ARMS,
    REQUIRED_ARMS,
    candidate_arms,
    check_candidate_name,
)
from layergate.exporters.cli_options import named_values
from layergate.harness.gate import POLICY_HELP

policy_option = click.option("--policy", "policy_path",
                             type=click.Path(dir_okay=False, path_type=Path), help=POLICY_HELP)


def arm_options(fn: Callable) -> Callable:
    """--baseline URL, --baseline2 URL, --candidate [NAME=]URL (repeatable: several
    candidates in one replay) and a --model-ARM NAME beside each."""
    fn = click.option(f"--model-{CANDIDATE}", multiple=True, metavar="[NAME=]MODEL",
                      help="`model` to send to the candidates (NAME=MODEL: to candidate "
                           "NAME only). Repeatable.")(fn)
    for arm in reversed(REFERENCE_ARMS):
        fn = click.option(f"--model-{arm}", metavar="NAME",
                          help=f"`model` to send to {arm}.")(fn)
    fn = click.option(f"--{CANDIDATE}", multiple=True, required=True, metavar="[NAME=]URL",
                      help=f"{ARM_ROLES[CANDIDATE]} Repeat it as NAME=URL to judge several "
                           f"candidates against the same baseline and noise floor in one "
                           f"replay (a bare URL is the arm `{CANDIDATE}`).")(fn)
    for arm in reversed(REFERENCE_ARMS):
        fn = click.option(f"--{arm}", required=arm in REQUIRED_ARMS, metavar="URL",
                          help=ARM_ROLES[arm])(fn)
    return fn


def arms_and_models(params: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The arms (name -> URL, in run order) and models that `arm_options` parsed."""
    arms = {arm: params[arm] for arm in REFERENCE_ARMS if params[arm]}
    arms.update(_named(params[CANDIDATE], f"--{CANDIDATE}"))
    models = {arm: params[f"model_{arm}"] for arm in REFERENCE_ARMS if params[f"model_{arm}"]}
    named = _named(params[f"model_{CANDIDATE}"], f"--model-{CANDIDATE}")
    for name in named:
        if name != CANDIDATE and name not in arms:
            raise click.BadParameter(f"no candidate named {name!r}",
                                     param_hint=f"--model-{CANDIDATE}")
    for name in candidate_arms(arms):
        if name in named or CANDIDATE in named:
            models[name] = named.get(name, named.get(CANDIDATE))
    return arms, models


def _named(values: tuple[str, ...], option: str) -> dict[str, str]:
    """`[NAME=]VALUE` options as NAME -> VALUE (a bare VALUE is the arm `candidate`), each
    name a valid candidate's."""
    try:
        out = named_values(values, CANDIDATE, CANDIDATE)
        for name in out:
            check_candidate_name(name)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from exc
    return out
