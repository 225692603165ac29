"""A chat answer's parts from the model's text: reasoning (granite markers, `reasoning.py`),
content, and tool calls (pythonic, `tool_parser.py`), streamed or whole.

`AnswerParser.feed(text)` takes each token's text and returns the parts that are certain by
now; `finish()` returns the rest and the tool calls. Reasoning is split off first, and the
content after it is what the tool parser reads, as vLLM runs its reasoning parser before its
tool parser. Content that starts with "[" is held back while it may still be a list of calls
(the call is only known once the list closes and the output ends); if it turns out not to
be one it is released as content. A whole response is the same parser fed the whole text,
so streamed and whole answers always agree.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from layergate.reference_engine.server.reasoning import CONTENT, REASONING, GraniteSplitter, Piece
from layergate.reference_engine.server.tool_parser import ParsedCall, could_be_calls, parse_calls


@dataclass(frozen=True)
class AnswerOptions:
    """What a request asks of its answer: tool calls parsed, reasoning split off."""

    tools: bool = False
    reasoning: str | None = None  # a parser of config.REASONING_PARSERS
    call_id_seed: bytes = b""  # tool call ids are derived from it (the prompt's token ids)

    @property
    def active(self) -> bool:
        return self.tools or self.reasoning is not None

    def call_id(self, index: int) -> str:
        """Deterministic: the same prompt gets the same ids on every arm and every replay."""
        digest = hashlib.blake2b(self.call_id_seed + index.to_bytes(4, "big"), digest_size=12)
        return f"call_{digest.hexdigest()}"


@dataclass
class Answer:
    """A whole answer: `content` None when the answer is only calls (or only reasoning)."""

    content: str | None
    reasoning: str | None
    tool_calls: list[ParsedCall] = field(default_factory=list)


class AnswerParser:
    def __init__(self, options: AnswerOptions) -> None:
        self.options = options
        self._splitter = GraniteSplitter() if options.reasoning else None
        self._tools = "undecided" if options.tools else "content"  # -> holding | content
        self._held = ""

    def feed(self, text: str) -> list[Piece]:
        pieces = self._splitter.feed(text) if self._splitter else [(CONTENT, text)]
        return self._route(pieces)

    def finish(self) -> tuple[list[Piece], list[ParsedCall]]:
        out = self._route(self._splitter.finish()) if self._splitter else []
        if self._tools == "holding":
            held, self._held, self._tools = self._held, "", "content"
            calls = parse_calls(held)
            if calls:
                return out, calls
            out.append((CONTENT, held))
        return out, []

    def whole(self, text: str) -> Answer:
        pieces = self.feed(text)
        rest, calls = self.finish()
        pieces += rest
        reasoning = "".join(t for kind, t in pieces if kind == REASONING)
        content = "".join(t for kind, t in pieces if kind == CONTENT)
        has_reasoning = any(kind == REASONING for kind, _ in pieces)
        return Answer(content=None if calls or (has_reasoning and not content) else content,
                      reasoning=reasoning if has_reasoning else None, tool_calls=calls)

    def _route(self, pieces: list[Piece]) -> list[Piece]:
        """Content through the tool stage; reasoning passes."""
        out: list[Piece] = []
        for kind, text in pieces:
            if kind != CONTENT or self._tools == "content":
                if text:
                    out.append((kind, text))
                continue
            self._held += text
            if self._tools == "undecided" and self._held:
                self._tools = "holding" if self._held.startswith("[") else "content"
            if self._tools == "holding" and not could_be_calls(self._held):
                self._tools = "content"
            if self._tools == "content" and self._held:
                out.append((CONTENT, self._held))
                self._held = ""
        return out
