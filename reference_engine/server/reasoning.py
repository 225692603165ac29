"""Reasoning in the model's text, marked as IBM Granite marks it: the markers of vLLM's
`granite` reasoning parser (`--reasoning-parser granite`,
vllm/reasoning/granite_reasoning_parser.py):

    Here's my thought process: <reasoning> Here's my response: <content>

("Here is" works as well as "Here's", as in vLLM.) The output must open with a thought-process
marker; then everything up to a response marker is reasoning and everything after it is
content. An output that does not open with the marker is all content; one that never reaches
a response marker is all reasoning (vLLM's streaming rule; its non-streamed path would call
that content, so its two paths disagree where ours cannot). Whitespace around the markers
belongs to neither part.

`GraniteSplitter` works on text as it streams and holds back only what may still be part of
a marker; a whole output goes through the same splitter, so a stream and a whole response
always split alike.
"""

from __future__ import annotations

THINK_STARTS = ("Here's my thought process:", "Here is my thought process:")
RESPONSE_STARTS = ("Here's my response:", "Here is my response:")

REASONING = "reasoning"
CONTENT = "content"
Piece = tuple[str, str]  # (REASONING | CONTENT, text)


class GraniteSplitter:
    def __init__(self) -> None:
        self._state = "start"  # start -> reasoning -> content, or start -> content
        self._held = ""
        self._skip_space = False  # drop whitespace right after a marker

    def feed(self, text: str) -> list[Piece]:
        self._held += text
        out: list[Piece] = []
        if self._state == "start":
            marker = next((m for m in THINK_STARTS if self._held.startswith(m)), None)
            if marker is None:
                if any(m.startswith(self._held) for m in THINK_STARTS):
                    return out  # still possibly the marker
                self._state = CONTENT
            else:
                self._held = self._held[len(marker):]
                self._state, self._skip_space = REASONING, True
        if self._skip_space:
            self._held = self._held.lstrip()
            if not self._held:
                return out
            self._skip_space = False
        if self._state == REASONING:
            found = [(self._held.find(m), m) for m in RESPONSE_STARTS if m in self._held]
            if found:
                at, marker = min(found)
                reasoning = self._held[:at].rstrip()
                if reasoning:
                    out.append((REASONING, reasoning))
                rest = self._held[at + len(marker):]
                self._held, self._state, self._skip_space = "", CONTENT, True
                return out + self.feed(rest)
            keep = _held_tail(self._held)
            sent = self._held[:len(self._held) - keep]
            if sent:
                out.append((REASONING, sent))
            self._held = self._held[len(sent):]
            return out
        if self._held:
            out.append((CONTENT, self._held))
            self._held = ""
        return out

    def finish(self) -> list[Piece]:
        """What is still held once the output is complete."""
        held, self._held = self._held, ""
        if self._state == "start" and held:
            self._state = CONTENT
            return [(CONTENT, held)]
        if self._state == REASONING and held.rstrip():
            return [(REASONING, held.rstrip())]
        return []


def _held_tail(text: str) -> int:
    """Length of the end of `text` that may still turn out to be (whitespace before) a
    response marker: trailing whitespace, or the longest marker prefix plus the whitespace
    before it."""
    best = 0
    for marker in RESPONSE_STARTS:
        for n in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:n]):
                best = max(best, n)
                break
    body = text[:len(text) - best]
    return len(text) - len(body.rstrip())
