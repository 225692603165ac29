"""`layergate demo`: the whole A/B evaluation on this machine, end to end. Its options are
`DemoConfig`'s fields (harness/stack/demo_config.py); `--quick` is its QUICK preset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.cli_options import config_values, field_option
from layergate.exporters.errors import InfrastructureError
from layergate.harness.cli.exits import exits
from layergate.harness.stack.demo_config import QUICK, DemoConfig


def _demo_option(name: str, *flags: str, **attrs: Any):
    quick = QUICK.get(name)
    note = f"{quick:g} with --quick" if quick is not None else ""
    return field_option(DemoConfig, name, *flags, default_note=note, **attrs)


@exits(ExitCode.PASS, ExitCode.FAIL, ExitCode.USAGE, ExitCode.INFRASTRUCTURE,
       PASS="the demo reached a verdict (whatever it is: a fail is a finding, not an error)",
       FAIL="interrupted (Ctrl-C): every process it started is stopped",
       INFRASTRUCTURE="a part of the stack failed")
@click.command(name="demo")
@_demo_option("out", type=click.Path(file_okay=False, path_type=Path))
@_demo_option("candidates", "--candidate", multiple=True, deprecated=("--candidate-policy",))
@_demo_option("scenario")
@_demo_option("requests")
@_demo_option("max_tokens")
@_demo_option("rate")
@_demo_option("repeats")
@_demo_option("threads")
@_demo_option("gate_policy", "--policy", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--quick", is_flag=True,
              help="A much smaller run: a first look in a couple of minutes, and the test "
                   "suite's demo.")
@_demo_option("hold")
@click.pass_context
def command(ctx: click.Context, quick: bool, **_: Any) -> None:
    """Run the main job on the bundled model: start baseline, baseline2 (the noise floor)
    and an engine per candidate (default: static, speculative and dynamic), a real
    Prometheus scraping them, replay the saas-qa traffic (the saas-mix and questions with
    reference answers, for accuracy) to all of them at the same
    intended times, run the determinism suite on a sample, compute the figures, gate every
    candidate against the same baselines and write runs/<id>/ with report.html, gate.json,
    junit.xml and report.md.

    Prints each candidate's verdict and why, the leaderboard, the recommendation (the
    passing candidate that saves the most, or none), what each saved and broke in plain
    words, and where to look. `--candidate X` runs one. Ctrl-C stops every process it
    started.
    """
    from layergate.harness.gate import load_policy
    from layergate.harness.stack.demo import run_demo

    given = config_values(ctx, DemoConfig, given_only=True)
    out = given.pop("out", ctx.params["out"])
    config = DemoConfig.quick(out, **given) if quick else DemoConfig(out=out, **given)
    load_policy(config.gate_policy)  # a bad policy should fail now, not after minutes of replay
    try:
        outcome = run_demo(config)
    except FileNotFoundError as exc:  # a program of the stack not installed
        raise InfrastructureError(str(exc)) from exc
    except KeyboardInterrupt:
        click.echo("interrupted: every process the demo started has been stopped", err=True)
        raise SystemExit(ExitCode.FAIL) from None
    click.echo(f"verdict: {outcome.verdict}  rollout: {outcome.rollout}  "
               f"report: {outcome.reports['html']}")
