"""Section `engines` of the side-by-side: every tool against a real engine, one engine after the
other (layergate's reference engine, `layergate serve` on the bundled SmolLM2 with 1 torch
thread; llama.cpp's server on the same model's GGUF, tests/support/llamacpp.py), at one low
rate with few requests and short outputs. There is no truth here: the tools' TTFT / ITL / E2E
percentiles side by side, each tool's distance from the median of the tools, and beside them
what the engine itself says of each run (benchmarks/peers/engine_timings.py), with what that
means.

Output lengths: every tool asks /v1/completions for `max_tokens` (both engines honour it);
vllm bench, inference-perf and layergate's traffic also send `ignore_eos`, which neither engine
honours, so a request may end early on EOS: the engine's own count of output tokens per
request is printed for each run.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from benchmarks.peers.common import QUANTILES, TOKENIZER, Load, Measured, fresh
from benchmarks.peers.engine_timings import Reference, engine_reference, llamacpp_reference
from benchmarks.peers.errors import adapter_of
from layergate.harness.processes import ManagedProcess
from layergate.harness.stack.engines import start_engine
from tests.support.llamacpp import start_llamacpp

METRICS = ("ttft", "itl", "e2e")
# why a tool gets no answer from an engine, where that is known
KNOWN = {("llamacpp", "vllm-bench"):
         "llama-cpp-python answers 400 to every request: vllm bench sends an x-request-id "
         "header ('bench-...-N'), and the server's starlette_context RequestIdPlugin refuses "
         "one that is not a UUID",
         ("llamacpp", "aiperf"):
         "aiperf writes no inter_token_latency: it is run with --use-server-token-count, and "
         "llama-cpp-python sends no usage (it ignores stream_options.include_usage)"}


@dataclasses.dataclass(frozen=True)
class Row:
    engine: str
    tool: str
    rate: float
    requests: int
    output_tokens: int
    measured: Measured | None  # None: the tool failed (see error)
    reference: Reference | None
    error: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engines", default="layergate,llamacpp",
                        help="real engines of the engines table (layergate, llamacpp)")
    parser.add_argument("--engine-rate", type=float, default=0.5)
    parser.add_argument("--engine-requests", type=int, default=12)
    parser.add_argument("--engine-output-tokens", type=int, default=16)


# --- the engines: started, scraped, stopped ---------------------------------------------------

@dataclasses.dataclass
class Engine:
    """A running engine and how it says what it saw: `mark()` before a run, `since(mark)`
    after it."""

    name: str
    process: ManagedProcess
    model: str
    mark: Callable[[], object]
    since: Callable[[object], Reference]


def _model(url: str) -> str:
    answer = httpx.get(f"{url}/v1/models", timeout=30)
    answer.raise_for_status()
    return answer.json()["data"][0]["id"]


def _layergate(process: ManagedProcess) -> Engine:
    def scrape() -> str:
        answer = httpx.get(f"{process.url}/metrics", timeout=30)
        answer.raise_for_status()
        return answer.text

    return Engine("layergate", process, _model(process.url), scrape,
                  lambda before: engine_reference(before, scrape(), f"{process.url}/metrics"))


def _llamacpp(process: ManagedProcess) -> Engine:
    def size() -> int:
        return len(process.log())

    return Engine("llamacpp", process, _model(process.url), size,
                  lambda start: llamacpp_reference(process.log()[start:], str(process.log_path)))


STARTERS: dict[str, Callable[[], Engine]] = {
    # 1 torch thread (start_engine's default), full depth: the reference engine as shipped
    "layergate": lambda: _layergate(start_engine(
        "--skip-policy", "full", env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})),
    "llamacpp": lambda: _llamacpp(start_llamacpp()),
}


@contextmanager
def running(name: str) -> Iterator[Engine]:
    if name not in STARTERS:
        raise ValueError(f"--engines: unknown {name!r}; known: {', '.join(STARTERS)}")
    engine = STARTERS[name]()
    try:
        yield engine
    finally:
        engine.process.stop()


def measure(args: argparse.Namespace, tools: list[str], work: Path) -> list[Row]:
    rows = []
    for name in args.engines.split(","):
        print(f"engines: starting {name}", file=sys.stderr)
        with running(name) as engine:
            for tool in tools:
                rows.append(one_run(engine, tool, args, fresh(work / f"{name}-{tool}")))
                print(f"engines: {tool} on {name} done", file=sys.stderr)
    return rows


def one_run(engine: Engine, tool: str, args: argparse.Namespace, work: Path) -> Row:
    """One tool's run against the engine; a tool that fails is a row with its error, so one
    tool cannot hide the others' figures."""
    adapter, venv = adapter_of(tool)
    load = Load(url=engine.process.url, model=engine.model, rate=args.engine_rate,
                requests=args.engine_requests, prompt_tokens=args.prompt_tokens,
                output_tokens=args.engine_output_tokens, tokenizer=TOKENIZER, seed=args.seed)
    mark = engine.mark()
    measured, error = None, None
    try:
        measured = adapter.run(load, work / "out", venv)
    except Exception as exc:  # noqa: BLE001 - reported in the table, the others still run
        error = f"{type(exc).__name__}: {str(exc)[-600:]}"
        print(f"engines: {tool} on {engine.name} failed: {error}", file=sys.stderr)
    return Row(engine.name, tool, load.rate, load.requests, load.output_tokens, measured,
               engine.since(mark), error)


# --- the table ------------------------------------------------------------------------------

def answered(row: Row) -> Measured | None:
    """The tool's figures, None when it failed or no request of it succeeded (a tool then
    writes zeros, not latencies)."""
    return row.measured if row.measured is not None and row.measured.ok > 0 else None


def medians(rows: list[Row]) -> dict[tuple[str, int], float]:
    """(metric, quantile) -> the median over the tools that reported it."""
    out = {}
    for name in METRICS:
        for q in QUANTILES:
            values = [getattr(m, name)[q] for m in map(answered, rows)
                      if m and q in getattr(m, name)]
            if values:
                out[(name, q)] = statistics.median(values)
    return out


def from_median(row: Row, median: dict[tuple[str, int], float]) -> dict[tuple[str, int], float]:
    """The row's figures minus the tools' median, in seconds."""
    m = answered(row)
    if m is None:
        return {}
    return {(n, q): getattr(m, n)[q] - median[(n, q)] for n in METRICS
            for q in QUANTILES if q in getattr(m, n) and (n, q) in median}


def _ms(x: float | None, sign: bool = False) -> str:
    return "—" if x is None else (f"{x * 1000:+.1f}" if sign else f"{x * 1000:.1f}")


def _tokens(ref: Reference | None, asked: int) -> str:
    if ref is None or ref.tokens_mean is None:
        return "—"
    if ref.tokens:
        spread = f"{min(ref.tokens)}–{max(ref.tokens)}" if min(ref.tokens) != max(ref.tokens) \
            else f"{ref.tokens[0]}"
        short = sum(t < asked for t in ref.tokens)
        return f"{spread}, {short} short" if short else spread
    limit = f", {ref.requests - ref.ended_on_limit} on EOS" \
        if ref.ended_on_limit is not None and ref.ended_on_limit < ref.requests else ""
    return f"{ref.tokens_mean:.1f}{limit}"


def print_table(rows: list[Row]) -> None:
    head = ["tool", "ok", "engine's tokens/req"] + [f"{n} p{q}" for n in METRICS
                                                    for q in QUANTILES]
    for engine in dict.fromkeys(r.engine for r in rows):
        mine = [r for r in rows if r.engine == engine]
        first = mine[0]
        median = medians(mine)
        print(f"{engine}: each tool's figures in ms, {first.requests} requests at "
              f"{first.rate:g}/s asking for {first.output_tokens} output tokens; "
              "(± the tools' median)")
        print(" | ".join(head))
        for r in mine:
            diff = from_median(r, median)
            cells = [r.tool, "failed" if r.measured is None else str(r.measured.ok),
                     _tokens(r.reference, r.output_tokens)]
            for n in METRICS:
                for q in QUANTILES:
                    got = getattr(answered(r), n).get(q) if answered(r) else None
                    cells.append("—" if got is None else
                                 f"{_ms(got)} ({_ms(diff.get((n, q)), sign=True)})")
            print(" | ".join(cells))
        print(" | ".join(["median of the tools", "", ""] + [_ms(median.get((n, q)))
                                                            for n in METRICS for q in QUANTILES]))
        for r in mine:
            ref = r.reference
            if ref is None:
                continue
            cells = [f"{engine} itself, during {r.tool}", str(ref.requests), ""]
            cells += [_ms(getattr(ref, n).get(q)) for n in METRICS for q in QUANTILES]
            means = ", ".join(f"{n} {_ms(v)}" for n, v in ref.means.items())
            print(" | ".join(cells) + (f" | mean {means}" if means else ""))
        meanings = dict.fromkeys(m for r in mine if r.reference for m in r.reference.meaning)
        for m in meanings:
            print(f"{engine}: {m}")
        for r in mine:
            if r.error:
                print(f"{r.tool} on {engine}: failed: {r.error}")
            if answered(r) is None and (engine, r.tool) in KNOWN:
                print(f"{r.tool} on {engine}: {KNOWN[(engine, r.tool)]}")
        print()
