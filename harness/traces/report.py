"""What an import did, row by row in sums: `ImportTally` counts while the rows stream past, and
becomes the frozen `ImportReport` written next to the traffic (JSON) and printed."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layergate.exporters.atomic import write_json_atomic

QUOTED_ERRORS = 10  # malformed rows quoted in the report (all are counted)
# rows left out, by why
OUTSIDE_WINDOW, SAMPLED_OUT, TOO_LONG, AFTER_LIMIT = (
    "outside_window", "sampled_out", "too_long", "after_limit")


@dataclass
class ImportTally:
    rows: int = 0  # data rows read (a sharegpt conversation counts each human turn)
    written: int = 0
    bad: int = 0
    errors: list[str] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    clipped: list[str] = field(default_factory=list)  # ids whose prompt was clipped
    capped: list[str] = field(default_factory=list)  # ids whose max_tokens was capped
    raised: list[str] = field(default_factory=list)  # ids with 0 output, sent max_tokens 1
    # tool calling (sharegpt): ids of requests whose conversation calls tools but whose log
    # names no tools list, whose tools list did not parse (both sent without `tools`), and
    # whose history or reply holds a <tool_call> block that did not parse (kept as text)
    tools_missing: list[str] = field(default_factory=list)
    tools_unparsed: list[str] = field(default_factory=list)
    calls_unparsed: list[str] = field(default_factory=list)
    # openai-batch --responses: ids with no line in the output file, ids whose line is a
    # failed request (neither gets a recorded response), custom_ids of lines matching no request
    no_response: list[str] = field(default_factory=list)
    response_failed: list[str] = field(default_factory=list)
    responses_unmatched: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    span_s: float = 0.0  # the written schedule: the last offset
    limit_reached: bool = False  # reading stopped at --limit

    def leave_out(self, why: str) -> None:
        self.left_out[why] = self.left_out.get(why, 0) + 1

    def bad_row(self, message: str) -> None:
        self.bad += 1
        if len(self.errors) < QUOTED_ERRORS:
            self.errors.append(message)


@dataclass(frozen=True)
class ImportReport:
    config: dict[str, Any]
    tokenizer: str | None
    tally: ImportTally
    shared_leads: int = 0  # mooncake blocks whose first token repeats a sibling block's

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "tokenizer": self.tokenizer,
                **dataclasses.asdict(self.tally), "shared_leads": self.shared_leads}

    def write(self, path: Path) -> Path:
        return write_json_atomic(path, self.to_json())

    def lines(self) -> list[str]:
        """The summary the command prints."""
        t = self.tally
        tokens = f"{t.input_tokens} prompt tokens, " if t.input_tokens else ""
        out = [f"{t.written} requests written from {t.rows} rows ({tokens}"
               f"{t.output_tokens} output tokens asked, schedule {t.span_s:.1f} s)"]
        if t.bad:
            out.append(f"{t.bad} malformed rows skipped (--skip-bad), first: {t.errors[0]}")
        out += [f"{n} rows left out: {why.replace('_', ' ')}" for why, n in t.left_out.items()]
        for what, ids in (("prompts clipped to --max-input-tokens", t.clipped),
                          ("max_tokens capped at --max-output-tokens", t.capped),
                          ("recorded outputs of 0 tokens sent as max_tokens 1", t.raised),
                          ("requests call tools but the log names no tools list: sent "
                           "without `tools`", t.tools_missing),
                          ("requests whose log's tools list did not parse: sent without "
                           "`tools`", t.tools_unparsed),
                          ("requests hold a <tool_call> that did not parse: kept as text",
                           t.calls_unparsed),
                          ("requests have no line in --responses: no recorded response",
                           t.no_response),
                          ("requests failed in the batch: no recorded response",
                           t.response_failed),
                          ("lines of --responses match no request", t.responses_unmatched)):
            if ids:
                out.append(f"{len(ids)} {what}")
        if self.shared_leads:
            out.append(f"{self.shared_leads} blocks start like a sibling block (a prefix "
                       "followed by more distinct blocks than there are lead words)")
        return out
