"""`layergate import-results`: a load tool's per-request results (GuideLLM, AIPerf,
inference-perf, vllm bench serve) into a run directory as one arm, checked against the arms
already there. Its options are `ResultsImportConfig`'s fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.cli_options import config_values, field_option
from layergate.harness.cli.exits import exits
from layergate.harness.results_import.write import ResultsImportConfig


def _option(name: str, *flags: str, **attrs: Any):
    return field_option(ResultsImportConfig, name, *flags, **attrs)


@exits(ExitCode.PASS, ExitCode.USAGE, ExitCode.INFRASTRUCTURE, PASS="imported",
       USAGE="usage, an unreadable tool output, or an arm not comparable with the run's "
       "(the setting named)")
@click.command(name="import-results")
@click.argument("results", metavar="SOURCE", type=click.Path(exists=True, path_type=Path))
@_option("tool", required=True)
@_option("out", required=True, metavar="RUN_DIR", type=click.Path(file_okay=False,
                                                                    path_type=Path))
@_option("arm", required=True, metavar="NAME")
@_option("allow")
@_option("benchmark", metavar="N")
@click.pass_context
def command(ctx: click.Context, results: Path, **_: Any) -> None:
    """Add a load tool's results in SOURCE to RUN_DIR as arm NAME.

    SOURCE is GuideLLM's JSON report, AIPerf's artifact directory, inference-perf's report
    directory (run with report.request_lifecycle.per_request) or the result JSON of `vllm
    bench serve --save-result --save-detailed`. Import the baseline run, the baseline run
    again as baseline2 (the noise floor) and each candidate's run, then `layergate gate
    RUN_DIR --policy load-tools` (or compare, metrics, the reports) judges them: paired by
    prompt where every arm sent the same prompts, else unpaired, as the reports say. An arm
    run differently from the run's (endpoint, dataset, prompts, max tokens, ignore_eos,
    rate or concurrency, warm-up, token counter) is refused, naming the setting, unless
    --allow (then every report warns of it). What a tool did not record is listed, never
    made up.
    """
    from layergate.harness.results_import import import_results

    # SOURCE is the field `source`, named apart so that it is not taken for an option
    config = ResultsImportConfig(source=results, **config_values(ctx, ResultsImportConfig))
    done = import_results(config)
    run = done.run
    ok = sum(r.ok for r in run.requests)
    click.echo(f"{done.run_dir}: arm {done.arm} <- {run.tool} {run.version or ''}".rstrip()
               + f" ({len(run.requests)} requests, {ok} ok) from {run.source}")
    click.echo(f"  pairing: {done.pairing}")
    for line in done.warnings:
        click.echo(f"  warning: {line} (--allow)", err=True)
    for line in done.unchecked:
        click.echo(f"  not checked: {line}")
    for line in run.not_recorded:
        click.echo(f"  not recorded by {run.tool}: {line}")
