"""`TraceImportConfig`: the whole configuration of one `layergate import-trace`, recorded in its
import report so the same traffic can be made again."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters.errors import UsageError
from layergate.harness.traces import formats

EVAL_FIELDS = ("question_field", "answer_field", "choices_field", "answer_kind",
               "answer_tokens")
ANSWER_KINDS = ("exact", "contains", "numeric")
DEFAULT_BLOCK_SIZE = 512  # tokens per mooncake hash id (the trace's own block size)


class TraceImportConfigError(UsageError, ValueError):
    pass


@dataclass(frozen=True)
class TraceImportConfig:
    format: str = field(metadata={"help": "The trace's format.", "choices": formats.names})
    source: Path = field(metadata={"help": "The trace file."})
    out: Path = field(metadata={"help": "The traffic file to write (JSONL, docs/FORMATS.md); "
                                        "it appears only once complete."})
    tokenizer: str | None = field(default=None, metadata={
        "help": "The tokenizer.json (or a directory holding one, or a model name in the "
                "Hugging Face cache) whose tokens the made-up prompts are counted in, and "
                "replies and long prompts are measured with. Default: the embedded model's."})
    seed: int = field(default=0, metadata={
        "help": "Seed of the made-up prompt text (and of --sample): the same seed gives a "
                "byte-identical file."})
    block_size: int = field(default=DEFAULT_BLOCK_SIZE, metadata={
        "help": "mooncake: prompt tokens per hash id.", "min": 1})
    time_scale: float = field(default=1.0, metadata={
        "help": "Multiply the trace's inter-arrival times by X (0.1: ten times faster).",
        "min": 0, "min_open": True})
    start: float = field(default=0.0, metadata={
        "help": "Keep rows from S seconds after the first row (trace time, before "
                "--time-scale).", "min": 0})
    duration: float | None = field(default=None, metadata={
        "help": "Keep rows up to S seconds after --start (trace time).", "min": 0,
        "min_open": True})
    limit: int | None = field(default=None, metadata={
        "help": "Write at most N requests.", "min": 1})
    sample: float = field(default=1.0, metadata={
        "help": "Keep each row with probability P (seeded, so the same rows each time).",
        "min": 0, "max": 1, "min_open": True})
    max_input_tokens: int | None = field(default=None, metadata={
        "help": "Prompts longer than N tokens (the arm's context) are clipped to N, or left "
                "out with --drop-long; the report counts them.", "min": 1})
    drop_long: bool = field(default=False, metadata={
        "help": "Leave out prompts over --max-input-tokens instead of clipping them."})
    max_output_tokens: int | None = field(default=None, metadata={
        "help": "Cap max_tokens at N; the report lists the requests capped.", "min": 1})
    ignore_eos: bool = field(default=True, metadata={
        "help": "Length-only traces: ask for the recorded output length exactly (vLLM's "
                "ignore_eos and min_tokens). --no-ignore-eos for a server that refuses "
                "unknown request fields."})
    skip_bad: bool = field(default=False, metadata={
        "help": "Skip malformed rows (counted, the first ones quoted in the report) instead "
                "of stopping at the first."})
    scenario: str | None = field(default=None, metadata={
        "help": "The requests' scenario label. Default: the format's name."})
    question_field: str | None = field(default=None, metadata={
        "help": "Eval layouts (qa, multiple-choice, openai-evals): the field holding the "
                "question. Default: the first of question, prompt, input, problem, query "
                "(openai-evals: input)."})
    answer_field: str | None = field(default=None, metadata={
        "help": "Eval layouts: the field holding the right answer. Default: the first of "
                "answer, answers, target, targets, label, ideal (openai-evals: ideal)."})
    choices_field: str | None = field(default=None, metadata={
        "help": "multiple-choice: the field holding the choices. Default: choices or "
                "options."})
    answer_kind: str = field(default="exact", metadata={
        "help": "qa, openai-evals: the reference a free answer becomes: exact (normalised), "
                "contains, or numeric (the answer's last number).",
        "choices": ANSWER_KINDS})
    answer_tokens: int = field(default=64, metadata={
        "help": "Eval layouts: the max_tokens of each request.", "min": 1})
    responses: Path | None = field(default=None, metadata={
        "help": "openai-batch: the batch's output file (JSONL: custom_id, response.body); "
                "each request's recorded response is the body of its line, tool calls "
                "included."})
    report: Path | None = field(default=None, metadata={
        "help": "Where to write the import report (JSON). Default: next to --out, "
                "NAME.import.json."})

    def __post_init__(self) -> None:
        try:
            fmt = formats.get(self.format)
        except ValueError as exc:
            raise TraceImportConfigError(str(exc)) from None
        if self.drop_long and self.max_input_tokens is None:
            raise TraceImportConfigError("--drop-long drops prompts over --max-input-tokens: give "
                                         "that too")
        if not fmt.timed:
            given = [flag for flag, on in (("--time-scale", self.time_scale != 1.0),
                                           ("--start", self.start != 0.0),
                                           ("--duration", self.duration is not None)) if on]
            if given:
                raise TraceImportConfigError(f"{self.format} rows carry no timestamps, so "
                                             f"{given[0]} has nothing to act on (replay the "
                                             "traffic with --rate R or --users N)")
        evals_given = [f"--{name.replace('_', '-')}" for name in EVAL_FIELDS
                       if getattr(self, name) != _DEFAULTS[name]]
        if evals_given and not fmt.references:
            raise TraceImportConfigError(f"{evals_given[0]} is for the eval layouts (qa, "
                                         f"multiple-choice, openai-evals), not {self.format}")
        if self.responses is not None and self.format != "openai-batch":
            raise TraceImportConfigError(f"--responses is the output file of an OpenAI batch, "
                                         f"for --format openai-batch, not {self.format}")
        if self.answer_kind not in ANSWER_KINDS:
            raise TraceImportConfigError(f"--answer-kind must be one of {', '.join(ANSWER_KINDS)}: "
                                         f"{self.answer_kind!r}")
        if self.scenario is not None and not self.scenario.strip():
            raise TraceImportConfigError("--scenario must not be empty")
        checks = {"block_size": self.block_size >= 1, "time_scale": self.time_scale > 0,
                  "start": self.start >= 0, "sample": 0 < self.sample <= 1,
                  "duration": self.duration is None or self.duration > 0,
                  "limit": self.limit is None or self.limit >= 1,
                  "answer_tokens": self.answer_tokens >= 1}
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise TraceImportConfigError(f"{bad[0]} out of range: {getattr(self, bad[0])!r}")

    @property
    def eval_options(self) -> formats.EvalOptions:
        return formats.EvalOptions(**{name: getattr(self, name) for name in EVAL_FIELDS})

    @property
    def label(self) -> str:
        return self.scenario or self.format

    @property
    def report_path(self) -> Path:
        return self.report or self.out.with_name(f"{self.out.stem}.import.json")

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("source", "out", "responses", "report"):
            out[key] = None if out[key] is None else str(out[key])
        return out


_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TraceImportConfig)}
