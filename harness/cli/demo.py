"""`layergate demo`: the whole A/B evaluation on this machine, end to end."""

from __future__ import annotations

from pathlib import Path

import click

from harness.stack.demo_config import CANDIDATES


class InfrastructureError(click.ClickException):
    """Exit code 4: a process of the stack did not start or a part failed to run."""

    exit_code = 4


@click.command(name="demo")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("runs"),
              show_default=True, help="Parent of the run directory runs/<id>/.")
@click.option("--candidate-policy", type=click.Choice(list(CANDIDATES)), default="dynamic",
              show_default=True,
              help="The candidate: dynamic skipping (bundled calibrated rules), "
                   "self-speculative decoding, static pruning, or engine-switches (prefix "
                   "cache on + bucketed padding against baselines with both off).")
@click.option("--scenario", default="saas-mix", show_default=True,
              help="Bundled traffic mix to replay (scenarios/mixes).")
@click.option("--requests", type=click.IntRange(min=1),
              help="Requests to replay [default: 48; 8 with --quick].")
@click.option("--max-tokens", type=click.IntRange(min=1),
              help="Cap on each request's max_tokens [default: 32; 16 with --quick].")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True),
              help="Poisson arrivals per second [default: 0.25, which three 1-thread "
                   "engines on 2 cores keep up with; 1 with --quick].")
@click.option("--repeats", type=click.IntRange(min=2),
              help="Repeats per prompt in the determinism suite [default: 3; 2 with --quick].")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="torch threads per engine; three engines share the cores, so keep "
                   "3 x threads <= cores.")
@click.option("--policy", "gate_policy", type=click.Path(dir_okay=False, exists=True,
                                                         path_type=Path),
              help="Gate policy YAML [default: scenarios/policies/default.yaml].")
@click.option("--quick", is_flag=True,
              help="A much smaller run (8 requests, 16 tokens, 2 repeats): a first look in "
                   "a couple of minutes, and the test suite's demo.")
@click.option("--hold", is_flag=True,
              help="Keep engines and Prometheus up after the verdict, until Ctrl-C.")
def command(out: Path, candidate_policy: str, scenario: str, requests: int | None,
            max_tokens: int | None, rate: float | None, repeats: int | None, threads: int,
            gate_policy: Path | None, quick: bool, hold: bool) -> None:
    """Run the main job on the bundled model: start baseline, baseline2 (the noise floor)
    and a candidate engine, a real Prometheus scraping them, replay the saas-mix traffic,
    run the determinism suite on a sample, compute the figures, gate the candidate and write
    runs/<id>/ with report.html, gate.json, junit.xml and report.md.

    Prints the verdict, the rollout stage, what the candidate saved and broke in plain
    words, and where to look. Ctrl-C stops every process it started.

    Exit codes: 0 the demo reached a verdict (whatever it is: a fail is a finding, not an
    error), 2 usage error, 4 a part of the stack failed.
    """
    from harness.gate import PolicyError, load_policy
    from harness.rundir import RunDirError
    from harness.stack.demo import DemoError, run_demo
    from harness.stack.demo_config import DemoConfig
    from harness.stack.health import StackError

    given = {"candidate_policy": candidate_policy, "scenario": scenario, "threads": threads,
             "gate_policy": gate_policy, "hold": hold}
    given |= {k: v for k, v in (("requests", requests), ("max_tokens", max_tokens),
                                ("rate", rate), ("repeats", repeats)) if v is not None}
    config = DemoConfig.quick(out, **given) if quick else DemoConfig(out=out, **given)
    try:  # a bad policy should fail now, not after minutes of replay
        load_policy(gate_policy)
    except PolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from exc
    try:
        outcome = run_demo(config)
    except (DemoError, StackError, RunDirError, FileNotFoundError) as exc:
        raise InfrastructureError(str(exc)) from exc
    except KeyboardInterrupt:
        click.echo("interrupted: every process the demo started has been stopped", err=True)
        raise SystemExit(130) from None
    click.echo(f"verdict: {outcome.verdict}  rollout: {outcome.rollout}  "
               f"report: {outcome.reports['html']}")
