"""`layergate import-trace`: a public trace (mooncake, azure, burstgpt, sharegpt,
openai-batch) or eval set (qa, multiple-choice, openai-evals) into layergate's traffic
format. Its options are `TraceImportConfig`'s fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.cli_options import config_values, field_option
from layergate.harness.cli.exits import exits
from layergate.harness.traces.config import TraceImportConfig


def _option(name: str, *flags: str, **attrs: Any):
    return field_option(TraceImportConfig, name, *flags, **attrs)


@exits(ExitCode.PASS, ExitCode.USAGE, PASS="written")
@click.command(name="import-trace")
@click.argument("trace", metavar="SOURCE", type=click.Path(dir_okay=False, path_type=Path))
@_option("format", required=True)
@_option("out", required=True, type=click.Path(dir_okay=False, path_type=Path))
@_option("tokenizer", metavar="PATH|MODEL")
@_option("seed")
@_option("block_size", metavar="TOKENS")
@_option("time_scale", metavar="X")
@_option("start", metavar="S")
@_option("duration", metavar="S")
@_option("limit", metavar="N")
@_option("sample", metavar="P")
@_option("max_input_tokens", metavar="N")
@_option("drop_long")
@_option("max_output_tokens", metavar="N")
@_option("ignore_eos")
@_option("skip_bad")
@_option("scenario", metavar="LABEL")
@_option("question_field", metavar="FIELD")
@_option("answer_field", metavar="FIELD")
@_option("choices_field", metavar="FIELD")
@_option("answer_kind")
@_option("answer_tokens", metavar="N")
@_option("responses", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
@_option("report", type=click.Path(dir_okay=False, path_type=Path))
@click.pass_context
def command(ctx: click.Context, trace: Path, **_: Any) -> None:
    """Write the traffic of trace SOURCE to --out, for `layergate replay --traffic`.

    Timestamps become send offsets from the first row (scaled by --time-scale). Length-only
    traces (mooncake, azure, burstgpt) get made-up prompts of exactly the recorded length in
    tokens of --tokenizer, the same for the same --seed, on /v1/completions, with the
    recorded output length as max_tokens; mooncake requests that share leading hash ids
    share exactly those blocks of prompt tokens, so a prefix cache sees the trace's reuse.
    sharegpt's human turns (and the turns after tool results) become chat requests with the
    conversation so far, tool calls and results as OpenAI messages and the log's tools as
    `tools`; openai-batch bodies are sent as they are, and with --responses (the batch's
    output file) its answers are the recorded responses (neither format has timestamps:
    replay them with --rate or --users). Eval layouts (qa, multiple-choice, openai-evals)
    become chat requests that carry a reference, the right answer the accuracy figures
    score against. A malformed row stops the import with its file, line and field
    (--skip-bad counts it instead); a file in another format than --format says which it
    looks like. The output appears only once complete; the import report (counts of what
    was left out, clipped or capped, the requests capped, and what of tool calls could not
    be kept) goes next to it.
    """
    from layergate.harness.traces import import_trace

    # SOURCE is the field `source`, named apart so that it is not taken for an option
    config = TraceImportConfig(source=trace, **config_values(ctx, TraceImportConfig))
    report = import_trace(config, note=lambda text: click.echo(f"note: {text}", err=True))
    click.echo(f"{config.out}: {report.lines()[0]}")
    for line in report.lines()[1:]:
        click.echo(f"  {line}")
    click.echo(f"  report: {config.report_path}")
