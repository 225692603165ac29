"""The result every calculator takes: one arm's answer to one replayed request.

The replayer writes these to the run's results store; calculators never see HTTP or files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from layergate.exporters.catalogue import CHARACTERS


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

    def per_request(self, key: str) -> Any:
        """A per-request number the calculators read: the `layergate` extension's, else
        the one the server reported in its answer (None: neither has it)."""
        ext = self.extension if isinstance(self.extension, dict) else {}
        return ext[key] if key in ext else self.reported.get(key)

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
