"""The result every calculator takes: one arm's answer to one replayed request.

The replayer writes these to the run's results store; calculators never see HTTP or files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from layergate.exporters.catalogue import CHARACTERS
from layergate.exporters.tool_calls import ToolCall, rendered


def answer_text(text: str, calls: Sequence[ToolCall], refusal: str | None) -> str:
    """An answer as one text, reasoning apart: what "the same output" and the text figures
    compare when no token ids are compared. The text alone when it holds nothing else (so
    plain answers read as they always did); else a refusal and the tool calls each on a
    line of its own after it, the calls' arguments as canonical JSON (tool_calls.rendered),
    so calls that say the same JSON read the same."""
    if not calls and not refusal:
        return text
    parts = [text] if text else []
    if refusal:
        parts.append(f"refusal: {refusal}")
    if calls:
        parts.append(rendered(calls))
    return "\n".join(parts)


@dataclass(frozen=True)
class ArmResult:
    """What one arm answered to one request.

    Times are seconds, measured from the *intended* send time (open loop, no coordinated
    omission). `itl_s` are the gaps between streamed chunks after the first.
    `token_ids` come from the engine's `layergate` extension when the arm is the reference
    engine; otherwise None and consistency falls back to the text.
    `tokens_from` says where `output_tokens` came from (catalogue.TOKEN_SOURCES; None in
    runs older than the field): with `characters` it is no token count, and figures per
    token leave the row out. `quirks` are how the server departed from the protocol on
    this request (catalogue.QUIRKS). `send_lag_s` is how late the request went out: the
    replayer's actual send minus the intended time (its schedule fidelity; None in runs
    older than the field).
    """

    request_id: str
    arm: str
    scenario: str
    ok: bool
    error: str | None = None
    http_status: int | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: tuple[float, ...] = ()
    output_text: str = ""
    output_tokens: int = 0
    prompt_tokens: int = 0
    finish_reason: str | None = None
    max_tokens: int | None = None
    # the server's own token ids (the `layergate` extension); None from other servers
    token_ids: tuple[int, ...] | None = None
    # per output token: logprob of the chosen token and {token: logprob} of the top ones
    logprobs: tuple[float, ...] | None = None
    top_logprobs: tuple[dict[str, float], ...] | None = None
    # the engine's `layergate` response extension, as returned (see docs/CONTRACTS.md)
    extension: dict[str, Any] = field(default_factory=dict)
    repeat: int = 0  # repeat index in a determinism run; 0 in a shadow replay
    concurrency: int = 1  # concurrency level in a determinism run
    tokens_from: str | None = None
    quirks: tuple[str, ...] = ()
    send_lag_s: float | None = None
    # per-request numbers a server reported outside the extension (its usage's cached
    # tokens, vLLM's per-request speculative metrics), under the extension's names
    # (docs/SERVERS.md, "Per-request numbers")
    reported: dict[str, Any] = field(default_factory=dict)
    # what the answer held besides its text (docs/METRICS.md, "What an answer is made of"):
    # its tool calls, its reasoning (streamed apart from the answer: `delta.reasoning` or
    # `reasoning_content`) and the count of reasoning tokens the usage gave, a refusal,
    # when its first answer token came (content, a tool call or a refusal; `ttft_s` is the
    # first token of any kind), and whether it met the schemas its request gave
    # ({"tool_calls": ..., "structured": ...}, only what the request asked for)
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning_text: str = ""
    reasoning_tokens: int | None = None
    refusal: str | None = None
    answer_ttft_s: float | None = None
    schema_valid: dict[str, bool] = field(default_factory=dict)

    def per_request(self, key: str) -> Any:
        """A per-request number the calculators read: the `layergate` extension's, else
        the one the server reported in its answer (None: neither has it)."""
        ext = self.extension if isinstance(self.extension, dict) else {}
        return ext[key] if key in ext else self.reported.get(key)

    @property
    def answer(self) -> str:
        """The answer as one text, reasoning apart (`answer_text`)."""
        return answer_text(self.output_text, self.tool_calls, self.refusal)

    @property
    def tokens_counted(self) -> bool:
        """`output_tokens` is a count of tokens (not of characters)."""
        return self.tokens_from != CHARACTERS

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (output tokens - 1) (docs/METRICS.md); None when undefined."""
        if (self.e2e_s is None or self.ttft_s is None or self.output_tokens < 2
                or not self.tokens_counted):
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass(frozen=True)
class MetricsScrape:
    """One arm's `/metrics` text, scraped before or after a run."""

    arm: str
    when: str  # "before" | "after"
    text: str
