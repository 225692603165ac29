"""Section `errors` of the side-by-side: every tool against the same echo server of known
behaviour (a fixed time to first token and per token, no slot limit), at the same offered
rates; each tool's TTFT / ITL / E2E percentiles beside what the server itself saw (its
`--timeline`), and the client CPU of each run (section `cost`, benchmarks/peers/cost.py,
splits it into a fixed part and a part per request, over repeated runs)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.peers import venvs
from benchmarks.peers.common import QUANTILES, TOKENIZER, Load, Measured, Truth, fresh, read_truth
from tests.support.echo import echo_server

ADAPTERS = {"layergate": "benchmarks.peers.layergate", "aiperf": "benchmarks.peers.aiperf",
            "guidellm": "benchmarks.peers.guidellm",
            "inference-perf": "benchmarks.peers.inference_perf",
            "vllm-bench": "benchmarks.peers.vllm_bench"}
FIRST_TOKEN_S, TOKEN_S = 0.1, 0.02
# the echo server's pacing: the errors table's, or none at all (an instant server, a flood's)
TIMED = ("--token-delay", str(TOKEN_S), "--first-token-delay", str(FIRST_TOKEN_S))
INSTANT: tuple[str, ...] = ()


def adapter_of(tool: str) -> tuple[Any, Path | None]:
    """The tool's adapter module and its venv (made on first use; None for layergate);
    `layergate@DIR` is layergate from the checkout at DIR."""
    if tool.startswith("layergate@"):
        from benchmarks.peers.layergate import at_checkout
        return at_checkout(tool), None
    adapter = importlib.import_module(ADAPTERS[tool])
    return adapter, venvs.ensure(adapter) if hasattr(adapter, "INSTALL") else None


@dataclasses.dataclass(frozen=True)
class Row:
    tool: str
    rate: float  # offered, open loop; unused when `users`
    measured: Measured
    truth: Truth
    users: int = 0  # a closed loop of this many users (Load.users)

    def errors_ms(self, name: str) -> dict[int, float | None]:
        got, true = getattr(self.measured, name), getattr(self.truth, name)
        return {q: (got[q] - true[q]) * 1000 if q in got and q in true else None
                for q in QUANTILES}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rates", default="2,8", help="offered rates of the errors table")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=16)


def one_run(tool: str, rate: float, args: argparse.Namespace, work: Path, users: int = 0,
            pacing: tuple[str, ...] = TIMED) -> Row:
    """`tool` against a fresh echo server paced by `pacing` (its arguments), open loop at
    `rate`, or closed loop of `users` users when not 0."""
    adapter, venv = adapter_of(tool)
    timeline = work / "timeline.jsonl"
    load = Load(url="", model="echo", rate=rate, requests=args.requests,
                prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
                tokenizer=TOKENIZER, seed=args.seed, users=users)
    with echo_server(*pacing, "--timeline", str(timeline)) as url:
        started = time.time()
        measured = adapter.run(dataclasses.replace(load, url=url), work / "out", venv)
    return Row(tool, rate, measured, read_truth(timeline, since=started), users)


def _cell(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f}"


def print_table(rows: list[Row]) -> None:
    head = ["tool", "rate", "ok"] + [f"{n} p{q}" for n in ("ttft", "itl", "e2e")
                                      for q in QUANTILES] + ["cpu ms/req"]
    print("error against the server's own timeline, in ms (tool − truth); truth: first "
          f"token after {FIRST_TOKEN_S * 1000:g} ms, then one every {TOKEN_S * 1000:g} ms")
    print(" | ".join(head))
    for r in rows:
        cells = [r.tool, f"{r.rate:g}", f"{r.measured.ok}/{r.truth.requests}"]
        cells += [_cell(r.errors_ms(n)[q]) for n in ("ttft", "itl", "e2e") for q in QUANTILES]
        cells.append(f"{r.measured.cpu_s * 1000 / max(r.truth.requests, 1):.2f}")
        print(" | ".join(cells))
    for r in rows:
        for note in r.measured.notes:
            print(f"{r.tool} @ {r.rate:g}/s: {note}")


def measure_errors(args: argparse.Namespace, tools: list[str], work: Path) -> list[Row]:
    rows = []
    for rate in (float(r) for r in args.rates.split(",")):
        for tool in tools:
            rows.append(one_run(tool, rate, args, fresh(work / f"{tool}-{rate:g}")))
            print(f"errors: {tool} at {rate:g}/s done", file=sys.stderr)
    return rows
