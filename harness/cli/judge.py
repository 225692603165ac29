"""`layergate judge`: an OpenAI-compatible endpoint judges the arms' answers to the records
whose reference is of kind `judge` (harness/judge.py); `layergate metrics` then scores them
by its verdicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from layergate.exporters.catalogue import ExitCode
from layergate.exporters.cli_options import config_values, field_option
from layergate.harness.cli.exits import RUN_DIR_UNREADABLE, exits
from layergate.harness.judge import Judge


@exits(ExitCode.PASS, ExitCode.INFRASTRUCTURE, PASS="judged",
       INFRASTRUCTURE=f"{RUN_DIR_UNREADABLE} or the "
       "judge unreachable")
@click.command(name="judge")
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@field_option(Judge, "endpoint", required=True, metavar="URL")
@field_option(Judge, "model", required=True)
@click.option("--prompt", "prompt_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A file holding the judge's prompt template, with {output} and optionally "
                   "{question} and {reference}; the default asks for CORRECT or WRONG.")
@field_option(Judge, "concurrency")
@field_option(Judge, "timeout_s", "--timeout")
@field_option(Judge, "max_tokens")
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Show a progress bar.")
@click.pass_context
def command(ctx: click.Context, run_dir: Path, prompt_file: Path | None, progress: bool,
            **_: Any) -> None:
    """Judge each arm's answer in RUN_DIR to every record whose reference is of kind
    `judge`, with an LLM at --endpoint.

    Each verdict is appended to RUN_DIR/judgements.jsonl as it comes back: an interrupted
    judge loses nothing, and a rerun asks only what has no verdict yet with this prompt.
    The baseline and the second baseline are judged alike, so where their outputs are the
    same text a different verdict is the judge's own noise; both figures are printed.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from layergate.exporters.errors import UsageError
    from layergate.harness.judge import DEFAULT_PROMPT, check_template, judge_run
    from layergate.harness.rundir import load_run

    if prompt_file is not None:
        try:
            template = prompt_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--prompt {prompt_file}: {exc}") from None
        check_template(template, f"--prompt {prompt_file}")
    else:
        template = DEFAULT_PROMPT
    run = load_run(run_dir)
    if run.traffic is None:
        raise UsageError(f"{run_dir}: the run kept no traffic file; nothing to judge")
    judge = Judge(template=template, **config_values(ctx, Judge))
    with Progress("judging", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=not progress, transient=True) as bar:
        task = bar.add_task("judge", total=None)
        summary = judge_run(run_dir, run.traffic.records, run.results, judge,
                            lambda done, total: bar.update(task, completed=done, total=total))
    click.echo(f"judged {summary.judged} outputs ({summary.kept} judged before); "
               f"{summary.unparsed} verdicts neither CORRECT nor WRONG")
    if summary.pairs:
        click.echo(f"baseline / second baseline: same verdict on {summary.agree} of "
                   f"{summary.pairs}; on the {summary.same_output} with the same output "
                   f"the judge disagreed with itself {summary.self_disagree} times")
