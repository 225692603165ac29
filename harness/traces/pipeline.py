"""`import_trace(config) -> ImportReport`: read a public trace row by row, turn each row into
a traffic record and stream them into the traffic file, which appears only once complete
(`layergate.exporters.traffic.write_traffic_lines`).

Per row, in order: a malformed row stops the import (or, with `skip_bad`, is counted); a row
its format leaves out is counted; the window (`start`, `duration`, in trace seconds since the
first row) and the seeded `sample` keep or drop it; prompts over `max_input_tokens` are
clipped or dropped and outputs over `max_output_tokens` capped; then the record is written,
its offset the row's time since the first written row times `time_scale`, until `limit`.
Length-only rows get a made-up prompt of exactly their length (`synth.py`), on
/v1/completions so that no chat template adds tokens. A session's turns (`SessionTurn`,
mooncake's multi-turn rows) become chat requests holding the session so far: each earlier
turn's made-up input and a made-up reply of its output length, then the turn's own new
input, so the turns group as one conversation (docs/FORMATS.md, "Conversation modes"); a
session is sampled whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from layergate.exporters import tokenizer
from layergate.exporters.traffic import (
    CHAT,
    COMPLETIONS,
    TrafficRecord,
    body_prompt_text,
    dumps_record,
    write_traffic_lines,
)
from layergate.harness.traces import formats
from layergate.harness.traces.config import TraceImportConfig
from layergate.harness.traces.embedded import tokenizer_path
from layergate.harness.traces.report import (
    OUTSIDE_WINDOW,
    SAMPLED_OUT,
    TOO_LONG,
    ImportReport,
    ImportTally,
)
from layergate.harness.traces.rows import LengthRow, RequestRow, SessionTurn, Skipped
from layergate.harness.traces.sniff import check_format
from layergate.harness.traces.source import TraceError
from layergate.harness.traces.synth import PromptSynth, unit

_SAMPLE_STREAM = 0x5A17  # sampling draws apart from the prompt text's
_REPLY_STREAM = 0x7E91  # a session's made-up replies apart from its inputs


class _Tokens:
    """The tokenizer, found only when a row first needs it."""

    def __init__(self, spec: str | None, note: Callable[[str], None]) -> None:
        self.spec, self.note, self.path = spec, note, None

    def get(self) -> str:
        if self.path is None:
            self.path = str(tokenizer_path(self.spec, self.note))
        return self.path

    def count(self, text: str) -> int:
        return tokenizer.count(self.get(), text)


def import_trace(config: TraceImportConfig, note: Callable[[str], None] = lambda _: None
                 ) -> ImportReport:
    """Write `config.out` and its report from `config.source`; a TraceError (a bad row, a
    wrong format) or a TokenizerError leaves nothing behind."""
    fmt = formats.get(config.format)
    check_format(config.source, fmt)
    tokens = _Tokens(config.tokenizer, note)
    synth = PromptSynth(tokens.get(), config.seed) if fmt.length_only else None
    tally = ImportTally()
    rows = fmt.read(config.source, formats.ReadContext(
        config.block_size, tokens.count, config.eval_options, config.responses,
        lambda name, rid: getattr(tally, name).append(rid)))
    write_traffic_lines(config.out, _Lines(config, fmt, tokens, synth, tally).lines(rows))
    report = ImportReport(config.to_json(), tokens.path, tally,
                          synth.shared_leads if synth else 0)
    report.write(config.report_path)
    return report


class _Lines:
    def __init__(self, config: TraceImportConfig, fmt: formats.TraceFormat, tokens: _Tokens,
                 synth: PromptSynth | None, tally: ImportTally) -> None:
        self.config, self.fmt, self.tokens, self.synth, self.tally = (config, fmt, tokens,
                                                                      synth, tally)
        self.t0: float | None = None  # trace time of the first row
        self.first: float | None = None  # of the first row written, from t0
        self.label = json.dumps(config.label, ensure_ascii=False)
        # session -> (its first row's line: the sampling key, its messages so far)
        self.sessions: dict[str, tuple[int, list[dict[str, Any]]]] = {}

    def lines(self, rows: Iterable[Any]) -> Iterator[str]:
        config, tally = self.config, self.tally
        for row in rows:
            tally.rows += 1
            try:
                if isinstance(row, TraceError):
                    raise row
                line = self._line(row)
            except TraceError as exc:
                if not config.skip_bad:
                    raise
                tally.bad_row(str(exc))
                continue
            if line is None:
                continue
            tally.written += 1
            yield line
            if config.limit is not None and tally.written >= config.limit:
                tally.limit_reached = True
                break
        if not tally.written:
            raise TraceError(config.source, 0, "(file)", "no request to write: "
                             f"{tally.rows} rows read, {tally.bad} malformed, left out "
                             f"{tally.left_out or 'none'}")

    def _line(self, row: Any) -> str | None:
        if isinstance(row, Skipped):
            self.tally.leave_out(row.why)
            return None
        key = row.line
        if isinstance(row, SessionTurn):
            key, row = self._turn(row)
        offset = self._offset(row)
        if offset is None:
            return None
        if self.config.sample < 1 and unit(self.config.seed ^ _SAMPLE_STREAM,
                                           key) >= self.config.sample:
            self.tally.leave_out(SAMPLED_OUT)
            return None
        if isinstance(row, LengthRow):
            return self._made_up(row, offset)
        return self._request(row, offset)

    def _offset(self, row: LengthRow | RequestRow) -> float | None:
        """The row's send offset, or None when it is outside the window."""
        if row.at_s is None:
            return 0.0
        if self.t0 is None:
            self.t0 = row.at_s
        since = row.at_s - self.t0
        if since < 0 or (self.first is not None and since < self.first):
            raise TraceError(self.config.source, row.line, self.fmt.time_field,
                             f"{since - (self.first or 0.0):.3f} s before the first row "
                             "written: the trace must be in time order")
        window = self.config.start, self.config.duration
        if since < window[0] or (window[1] is not None and since >= window[0] + window[1]):
            self.tally.leave_out(OUTSIDE_WINDOW)
            return None
        if self.first is None:
            self.first = since
        offset = round((since - self.first) * self.config.time_scale, 6)
        self.tally.span_s = max(self.tally.span_s, offset)
        return offset

    def _turn(self, row: SessionTurn) -> tuple[int, RequestRow]:
        """(the session's sampling key, the turn as a chat request): the session so far and
        the turn's made-up input; the session's history grows by it and a made-up reply."""
        first, history = self.sessions.setdefault(row.session, (row.line, []))
        synth, out = self.synth, max(row.output_tokens, 1)
        said = (synth.blocks(row.hash_ids, row.input_tokens, self.config.block_size)
                if row.hash_ids is not None else synth.prompt(row.line, row.input_tokens))
        messages = [*history, {"role": "user", "content": said}]
        history[:] = [*messages, {"role": "assistant",
                                  "content": synth.prompt(row.line ^ _REPLY_STREAM, out)}]
        self.tally.input_tokens += row.input_tokens
        body = {"messages": messages, "max_tokens": out, "temperature": 0}
        return first, RequestRow(row.line, f"{self.config.format}-{row.line}", CHAT, body,
                                 at_s=row.at_s, messages=messages)

    def _made_up(self, row: LengthRow, offset: float) -> str | None:
        config, tally = self.config, self.tally
        rid = f"{config.format}-{row.line}"
        n, out = row.input_tokens, row.output_tokens
        if config.max_input_tokens is not None and n > config.max_input_tokens:
            if config.drop_long:
                tally.leave_out(TOO_LONG)
                return None
            n = config.max_input_tokens
            tally.clipped.append(rid)
        if out == 0:
            out = 1
            tally.raised.append(rid)
        if config.max_output_tokens is not None and out > config.max_output_tokens:
            out = config.max_output_tokens
            tally.capped.append(rid)
        tally.input_tokens += n
        tally.output_tokens += out
        synth = self.synth
        text = (synth.blocks(row.hash_ids, n, config.block_size) if row.hash_ids is not None
                else synth.prompt(row.line, n))
        # the line dumps_record would write, formatted directly: the text needs no escaping
        # (synth.py) and the other values are numbers or checked names
        eos = f',"ignore_eos":true,"min_tokens":{out}' if config.ignore_eos else ""
        return (f'{{"id":"{rid}","offset_s":{offset!r},"scenario":{self.label},'
                f'"endpoint":"{COMPLETIONS}","body":{{"prompt":"{text}","max_tokens":{out},'
                f'"temperature":0{eos}}}}}')

    def _request(self, row: RequestRow, offset: float) -> str | None:
        config, tally = self.config, self.tally
        body = dict(row.body)
        limit = config.max_input_tokens
        if limit is not None and self.tokens.count(body_prompt_text(row.endpoint, body)) > limit:
            if config.drop_long or not row.messages:  # a batch body is sent as it is
                tally.leave_out(TOO_LONG)
                return None
            clipped = clip_messages(row.messages, limit, self.tokens)
            if clipped is None:
                tally.leave_out(TOO_LONG)
                return None
            body["messages"] = clipped
            tally.clipped.append(row.id)
        for key in ("max_tokens", "max_completion_tokens"):
            cap, asked = config.max_output_tokens, body.get(key)
            if cap is not None and isinstance(asked, int) and asked > cap:
                body[key] = cap
                tally.capped.append(row.id)
        if isinstance(body.get("max_tokens"), int):
            tally.output_tokens += body["max_tokens"]
        for name in row.notes:
            getattr(tally, name).append(row.id)
        return dumps_record(TrafficRecord(row.id, offset, config.label, row.endpoint, body,
                                          row.response, row.reference))


def clip_messages(messages: list[dict[str, Any]], limit: int, tokens: _Tokens
                  ) -> list[dict[str, Any]] | None:
    """The conversation within `limit` tokens of content: its earliest turns dropped first
    (it never starts with the assistant, nor with a tool result whose call was dropped),
    then the last message cut to what is left (when its content is text). None when only a
    tool result would be left: no request can hold it without its call."""
    def size(ms: list[dict[str, Any]]) -> int:
        return sum(tokens.count(body_prompt_text(CHAT, {"messages": [m]})) for m in ms)

    kept = list(messages)
    while len(kept) > 1 and (size(kept) > limit or kept[0]["role"] in ("assistant", "tool")):
        kept.pop(0)
    if kept[0]["role"] == "tool":
        return None
    last = kept[-1].get("content")
    if not isinstance(last, str):
        return kept
    room = max(0, limit - size(kept[:-1]))
    encoding = tokenizer.load(tokens.get()).encode(last, add_special_tokens=False)
    if len(encoding.ids) > room:
        kept[-1] = {**kept[-1], "content": last[: encoding.offsets[room][0]]}
    return kept
