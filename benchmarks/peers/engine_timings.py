"""What a real engine itself says of one tool's run, beside the tools' figures in the side-by-side's
`engines` section: a reference, not a truth (each engine times its own span of a request).

- layergate's engine: its /metrics (docs/CONTRACTS.md) scraped before and after the run; the
  difference of its histograms (arrival at the engine to first / last token, and per request
  (E2E - TTFT) / (tokens - 1)) gives exact means and percentiles estimated within buckets, as
  PromQL's histogram_quantile does; its requests counter says how many ended on the length
  limit and how many on EOS, its tokens counter how many tokens they had.
- llama-cpp-python's server: no /metrics and no `timings` in its responses, but at the end of
  each request it logs llama.cpp's `llama_perf_context_print` block: the prompt's eval time, the
  decode steps (`eval time = X ms / N runs`: each run one output token after the first, which
  the prompt's eval yields; a prompt it had cached is one replayed token, counted as a run,
  and no prompt eval) and the total. Its percentiles are over the requests of the run;
  the queue before a request and the HTTP around it are in neither.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.peers.common import QUANTILES, percentiles

PREFIX = "layergate_"
HISTOGRAMS = {"ttft": "time_to_first_token_seconds", "itl": "time_per_output_token_seconds",
              "e2e": "e2e_request_latency_seconds"}


@dataclass(frozen=True)
class Reference:
    """The engine's own view of one run, in seconds."""

    source: str  # where the figures come from
    requests: int  # requests the engine finished during the run
    tokens: tuple[int, ...]  # output tokens per request, where it says them one by one
    tokens_mean: float | None  # output tokens per request
    ended_on_limit: int | None  # requests stopped by max_tokens (None: not known)
    ttft: dict[int, float] = field(default_factory=dict)
    itl: dict[int, float] = field(default_factory=dict)
    e2e: dict[int, float] = field(default_factory=dict)
    means: dict[str, float] = field(default_factory=dict)
    meaning: tuple[str, ...] = ()


# --- layergate's engine: two scrapes of /metrics ------------------------------------------

def _samples(text: str, where: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape by (name, labels without `policy`), summed over policies."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "policy"))
                out[(s.name, labels)] = out.get((s.name, labels), 0.0) + float(s.value)
    except ValueError as exc:
        raise ValueError(f"{where}: unparsable Prometheus text ({exc})") from exc
    return out


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """PromQL's estimate of quantile `q` (0..1) from cumulative (upper bound, count) buckets,
    +Inf last: linear within the bucket it falls in; the highest finite bound if it falls in
    +Inf; None without observations."""
    buckets = sorted(buckets)
    total = buckets[-1][1] if buckets else 0.0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if math.isinf(upper):
                return lower
            inside = count - below
            return lower + (upper - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = upper, count
    return lower


def engine_reference(before: str, after: str, where: str = "/metrics") -> Reference:
    """The difference of two scrapes of layergate's engine, taken around one run."""
    a, b = _samples(before, f"{where} (before)"), _samples(after, f"{where} (after)")
    if not any(name.startswith(PREFIX) for name, _ in b):
        raise ValueError(f"{where}: no {PREFIX}* metrics (not layergate's engine)")

    def delta(name: str, labels: tuple[tuple[str, str], ...] = ()) -> float:
        return b.get((name, labels), 0.0) - a.get((name, labels), 0.0)

    finished = {dict(labels).get("finish_reason"): delta(name, labels)
                for name, labels in b if name == f"{PREFIX}requests_total"
                and dict(labels).get("status") == "ok"}
    requests = int(sum(finished.values()))
    tokens = delta(f"{PREFIX}generation_tokens_total")
    latencies: dict[str, dict[int, float]] = {}
    means = {}
    for key, metric in HISTOGRAMS.items():
        name = PREFIX + metric
        buckets = [(float(dict(labels)["le"]), delta(n, labels)) for n, labels in b
                   if n == f"{name}_bucket"]
        latencies[key] = {q: v for q in QUANTILES
                          if (v := histogram_quantile(q / 100, buckets)) is not None}
        count = delta(f"{name}_count")
        if count > 0:
            means[key] = delta(f"{name}_sum") / count
    return Reference(
        source="layergate engine /metrics", requests=requests, tokens=(),
        tokens_mean=tokens / requests if requests else None,
        ended_on_limit=int(finished.get("length", 0)), ttft=latencies["ttft"],
        itl=latencies["itl"], e2e=latencies["e2e"], means=means,
        meaning=("engine: TTFT and E2E from the request's arrival at the engine, ITL its "
                 "per-request (E2E - TTFT) / (tokens - 1); percentiles estimated within its "
                 "histogram buckets (histogram_quantile), means exact",))


# --- llama-cpp-python: its log ---------------------------------------------------------------

_NUMBER = r"([0-9.]+)"
PROMPT = re.compile(rf"prompt eval time =\s*{_NUMBER} ms /\s*(\d+) tokens")
EVAL = re.compile(rf"\beval time =\s*{_NUMBER} ms /\s*(\d+) runs")
TOTAL = re.compile(rf"total time =\s*{_NUMBER} ms /\s*(\d+) tokens")


@dataclass(frozen=True)
class PerfBlock:
    """One request's `llama_perf_context_print` lines, in seconds."""

    prompt_s: float
    prompt_tokens: int
    eval_s: float
    runs: int  # one-token batches: each output token after the first (and see output_tokens)
    total_s: float

    @property
    def output_tokens(self) -> int:
        # the first token comes of the prompt's batch; a prompt wholly in the cache is replayed
        # as one token, which llama.cpp counts as a run, with no prompt eval
        # (llama-cpp-python's Llama.generate)
        return self.runs + 1 if self.prompt_tokens else self.runs


def perf_blocks(log: str, where: str = "llama.cpp log") -> list[PerfBlock]:
    """Every complete block in `log`, in order; a block missing a line is an error naming it."""
    blocks, prompt, evals = [], None, None
    for number, line in enumerate(log.splitlines(), 1):
        if "llama_perf_context_print" not in line:
            continue
        if m := PROMPT.search(line):
            prompt = (float(m[1]) / 1000, int(m[2]))
        elif m := EVAL.search(line):
            evals = (float(m[1]) / 1000, int(m[2]))
        elif m := TOTAL.search(line):
            if prompt is None or evals is None:
                raise ValueError(f"{where}:{number}: a total time without its prompt eval "
                                 "and eval lines")
            blocks.append(PerfBlock(prompt[0], prompt[1], evals[0], evals[1], float(m[1]) / 1000))
            prompt = evals = None
    return blocks


def llamacpp_reference(log: str, where: str = "llama.cpp log") -> Reference:
    """The blocks llama.cpp logged during one run (the log's text written during it)."""
    blocks = perf_blocks(log, where)
    tokens = tuple(b.output_tokens for b in blocks)
    per_token = [b.eval_s / b.runs for b in blocks if b.runs]
    return Reference(
        source="llama.cpp's log (llama_perf_context_print)", requests=len(blocks),
        tokens=tokens, tokens_mean=float(np.mean(tokens)) if tokens else None,
        ended_on_limit=None, ttft=percentiles([b.prompt_s for b in blocks]),
        itl=percentiles(per_token), e2e=percentiles([b.total_s for b in blocks]),
        means={k: float(np.mean(v)) for k, v in (
            ("ttft", [b.prompt_s for b in blocks]), ("itl", per_token),
            ("e2e", [b.total_s for b in blocks])) if v},
        meaning=("llama.cpp: 'TTFT' its prompt eval time (0 for a prompt it had cached), "
                 "'ITL' eval time / runs per request (decode compute per token), 'E2E' its "
                 "total time: compute only, "
                 "no queue, no HTTP, so below every tool's by design",))
