"""Sections `fidelity` and `limits` of the side-by-side: how closely each tool keeps a
schedule. Both replay a timestamped trace (one `Trace`, written into each tool's own trace
format) against an echo server with no delays and read the server's `--timeline`.

Lag: the server records each request's arrival; the schedule's intended times are the
trace's offsets from a start aligned on the tool's first request (start = first arrival,
so the first lag is 0 by construction and a late first request makes the others look
early). The requests carry no id the server records, so the i-th arrival is matched to the
i-th intended time in order (layergate sends each record to 2 arms, its intended times
each counted twice).

- fidelity: one bursty trace (gaps from a fixed seed, some near-simultaneous); each tool's
  lag p50 / p99 / max and requests seen.
- limits: a constant-rate trace (intended = start + i / rate) at rising offered rates; the
  achieved rate (arrivals - 1) / their span and the lag p99 per rate; a rate is sustained
  when every request arrived, achieved >= --limits-min-share of offered and lag p99 <=
  --limits-max-lag-ms; the highest sustained rate per tool (a tool stops at its first
  failing rate). layergate's rates are per paired request (2 arm-requests each).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.peers.common import TOKENIZER, Load, read_truth
from benchmarks.peers.errors import adapter_of
from tests.support.echo import echo_server

BLOCK = 16  # tokens per hash id in the Mooncake rows (no prefix shared between rows)
EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)  # the Azure CSV's dates
ARMS = {"layergate": 2}  # requests the server sees per trace row


def arms_of(tool: str) -> int:
    """Requests the server sees per trace row (`layergate@DIR` is layergate)."""
    return ARMS.get(tool.split("@")[0], 1)


@dataclasses.dataclass(frozen=True)
class Trace:
    """Rows of (offset s from the first, prompt tokens, output tokens)."""

    offsets: tuple[float, ...]
    prompt_tokens: int = 32
    output_tokens: int = 4


def bursty(requests: int, seconds: float, seed: int) -> Trace:
    """`requests` rows over about `seconds`: exponential gaps, every fifth row a burst of
    three within a millisecond of each other."""
    rng = random.Random(seed)
    gaps = [0.0] + [rng.uniform(0, 0.001) if i % 5 in (1, 2) else rng.expovariate(1.0)
                    for i in range(1, requests)]
    scale = seconds / max(sum(gaps), 1e-9)
    offsets = np.cumsum([g * scale for g in gaps])
    return Trace(tuple(round(float(o), 6) for o in offsets))


def constant(rate: float, requests: int) -> Trace:
    return Trace(tuple(round(i / rate, 6) for i in range(requests)))


def write_layergate(trace: Trace, path: Path) -> Path:
    from layergate.exporters.traffic import COMPLETIONS, TrafficRecord, write_traffic
    prompt = " ".join(["w"] * trace.prompt_tokens)
    body = {"prompt": prompt, "max_tokens": trace.output_tokens, "stream": True,
            "ignore_eos": True, "model": "echo"}
    return write_traffic(path, [TrafficRecord(f"r-{i:05d}", o, "peers", COMPLETIONS, body)
                                for i, o in enumerate(trace.offsets)])


def write_mooncake(trace: Trace, path: Path) -> Path:
    """AIPerf's and vllm bench's format: `timestamp` in ms (float), lengths, hash ids."""
    blocks = -(-trace.prompt_tokens // BLOCK)
    path.write_text("".join(json.dumps(
        {"timestamp": round(o * 1000, 3), "input_length": trace.prompt_tokens,
         "output_length": trace.output_tokens,
         "hash_ids": list(range(i * blocks, (i + 1) * blocks))}) + "\n"
        for i, o in enumerate(trace.offsets)))
    return path


def write_guidellm(trace: Trace, path: Path) -> Path:
    """GuideLLM's trace_synthetic rows: `timestamp` in seconds, lengths."""
    path.write_text("".join(json.dumps(
        {"timestamp": o, "input_length": trace.prompt_tokens,
         "output_length": trace.output_tokens}) + "\n" for o in trace.offsets))
    return path


def write_azure(trace: Trace, path: Path) -> Path:
    """inference-perf's Azure CSV: TIMESTAMP a UTC date (microseconds), lengths."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
        for o in trace.offsets:
            when = EPOCH + datetime.timedelta(seconds=o)
            out.writerow([when.strftime("%Y-%m-%d %H:%M:%S.%f"), trace.prompt_tokens,
                          trace.output_tokens])
    return path


def lags(arrivals: list[float], offsets: tuple[float, ...], arms: int = 1) -> np.ndarray:
    """Each arrival less its intended time (the start aligned on the first arrival),
    matched in order; an arrival beyond the schedule's is ignored."""
    intended = np.repeat(np.asarray(offsets, dtype=float), arms)
    got = np.sort(np.asarray(arrivals, dtype=float))[:intended.size]
    return got - (got[0] + intended[:got.size]) if got.size else got


def replay(tool: str, trace: Trace, work: Path, seed: int) -> tuple[list[float], str]:
    """The tool replays `trace` against a fresh echo server; the arrivals it saw."""
    adapter, venv = adapter_of(tool)
    work.mkdir(parents=True, exist_ok=True)
    timeline = work / "timeline.jsonl"
    load = Load(url="", model="echo", rate=1.0, requests=len(trace.offsets),
                prompt_tokens=trace.prompt_tokens, output_tokens=trace.output_tokens,
                tokenizer=TOKENIZER, seed=seed)
    with echo_server("--timeline", str(timeline)) as url:
        load = dataclasses.replace(load, url=url)
        started = time.time()
        if tool.split("@")[0] == "layergate":
            checkout = Path(tool.split("@", 1)[1]) if "@" in tool else None
            _layergate(write_layergate(trace, work / "traffic.jsonl"), url, work, seed,
                       checkout)
        elif tool == "aiperf":
            adapter.replay_trace(write_mooncake(trace, work / "trace.jsonl"), load, work, venv,
                                 block_size=BLOCK)
        elif tool == "vllm-bench":
            adapter.replay_trace(write_mooncake(trace, work / "trace.jsonl"), load, work, venv,
                                 block_tokens=BLOCK)
        elif tool == "guidellm":
            adapter.replay_trace(write_guidellm(trace, work / "trace.jsonl"), load, work, venv)
        elif tool == "inference-perf":
            adapter.replay_trace(write_azure(trace, work / "trace.csv"), load, work, venv)
        else:
            return [], "cannot replay a timestamped trace"
    return list(read_truth(timeline, since=started).arrivals), ""


def _layergate(traffic: Path, url: str, work: Path, seed: int,
               checkout: Path | None = None) -> None:
    from benchmarks.peers.common import run_counted
    from benchmarks.peers.layergate import environment
    from layergate.harness.processes import layergate_command
    run_counted(layergate_command("replay", "--traffic", str(traffic), "--baseline", url,
                                  "--candidate", url, "--seed", str(seed), "--out",
                                  str(work / "run"), "--no-progress"), cwd=work,
                env=environment(checkout))


@dataclasses.dataclass(frozen=True)
class Fidelity:
    tool: str
    sent: int  # requests the schedule asked the server to see
    seen: int
    lag_ms: dict[str, float]  # p50, p99, max
    note: str = ""


def _lag_ms(lag: np.ndarray) -> dict[str, float]:
    if not lag.size:
        return {}
    return {"p50": float(np.percentile(lag, 50)) * 1000,
            "p99": float(np.percentile(lag, 99)) * 1000, "max": float(lag.max()) * 1000}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fidelity-requests", type=int, default=60)
    parser.add_argument("--fidelity-seconds", type=float, default=20.0)
    parser.add_argument("--limits-rates", default="50,100,200,400,800,1600")
    parser.add_argument("--limits-seconds", type=float, default=3.0)
    parser.add_argument("--limits-max-requests", type=int, default=2400)
    parser.add_argument("--limits-min-share", type=float, default=0.95)
    parser.add_argument("--limits-max-lag-ms", type=float, default=5.0)
    parser.add_argument("--limits-repeats", type=int, default=5,
                        help="climbs of the ladder per tool; the table gives each one's top")


def measure_fidelity(args: argparse.Namespace, tools: list[str], work: Path) -> list[Fidelity]:
    trace = bursty(args.fidelity_requests, args.fidelity_seconds, args.seed)
    rows = []
    for tool in tools:
        arms = arms_of(tool)
        try:
            arrivals, note = replay(tool, trace, work / tool, args.seed)
        except Exception as exc:  # noqa: BLE001 - the row says what broke, the others run
            arrivals, note = [], f"failed: {str(exc).splitlines()[0][:200]}"
        rows.append(Fidelity(tool, len(trace.offsets) * arms, len(arrivals),
                             _lag_ms(lags(arrivals, trace.offsets, arms)), note))
        print(f"fidelity: {tool} done", file=sys.stderr)
    return rows


def print_fidelity(rows: list[Fidelity]) -> None:
    print("schedule fidelity: the same bursty trace, lag = server arrival - (first arrival + "
          "intended offset), matched in order, in ms (layergate: 2 arm-requests per row)")
    print("tool | seen/sent | lag p50 | lag p99 | lag max")
    for r in rows:
        cells = [f"{r.lag_ms[k]:.1f}" if k in r.lag_ms else "—" for k in ("p50", "p99", "max")]
        print(" | ".join([r.tool, f"{r.seen}/{r.sent}", *cells]) + (f" ({r.note})"
                                                                   if r.note else ""))


@dataclasses.dataclass(frozen=True)
class Step:
    tool: str
    offered: float  # per trace row (layergate: per paired request)
    sent: int
    seen: int
    achieved: float | None  # per trace row, from the server's arrivals
    lag_p99_ms: float | None
    sustained: bool
    note: str = ""


def step(tool: str, offered: float, arrivals: list[float], trace: Trace, arms: int,
         min_share: float, max_lag_ms: float, note: str = "") -> Step:
    """One rate's verdict from the arrivals the server saw."""
    sent = len(trace.offsets) * arms
    span = max(arrivals) - min(arrivals) if len(arrivals) > 1 else 0.0
    achieved = (len(arrivals) / arms - 1) / span if span > 0 else None
    lag = lags(arrivals, trace.offsets, arms)
    p99 = float(np.percentile(lag, 99)) * 1000 if lag.size else None
    ok = (len(arrivals) == sent and achieved is not None and achieved >= min_share * offered
          and p99 is not None and p99 <= max_lag_ms)
    return Step(tool, offered, sent, len(arrivals), achieved, p99, ok, note)


def measure_limits(args: argparse.Namespace, tools: list[str], work: Path
                   ) -> dict[str, list[list[Step]]]:
    """Each tool climbs the ladder of rates until one is not sustained, `--limits-repeats`
    times; the tools take turns, so a slow minute of the machine falls on all of them."""
    out: dict[str, list[list[Step]]] = {tool: [] for tool in tools}
    for repeat in range(args.limits_repeats):
        for tool in tools:
            out[tool].append(climb(tool, args, work / f"{repeat}" / tool.replace("/", "_")))
    return out


def climb(tool: str, args: argparse.Namespace, work: Path) -> list[Step]:
    steps = []
    for rate in (float(r) for r in args.limits_rates.split(",")):
        n = max(2, min(args.limits_max_requests, round(rate * args.limits_seconds)))
        trace = constant(rate, n)
        try:
            arrivals, note = replay(tool, trace, work / f"{rate:g}", args.seed)
        except Exception as exc:  # noqa: BLE001 - the row says what broke
            arrivals, note = [], f"failed: {str(exc).splitlines()[0][:200]}"
        s = step(tool, rate, arrivals, trace, arms_of(tool), args.limits_min_share,
                 args.limits_max_lag_ms, note)
        steps.append(s)
        print(f"limits: {tool} at {rate:g}/s: {'ok' if s.sustained else 'not kept'}",
              file=sys.stderr)
        if not s.sustained:
            break
    return steps


def print_limits(result: dict[str, Any]) -> None:
    print("limits: a constant-rate trace against an instant echo server; achieved = "
          "(arrivals - 1) / their span; sustained = all arrived, achieved >= share of "
          "offered, lag p99 <= bound; rates per trace row (layergate: per paired request, "
          "twice that in arm-requests); each climb stops at its first rate not sustained")
    print("tool | climb | offered | seen/sent | achieved | lag p99 ms | sustained")
    for tool, climbs in result.items():
        for i, steps in enumerate(climbs, 1):
            for s in steps:
                achieved = "—" if s.achieved is None else f"{s.achieved:.1f}"
                lag = "—" if s.lag_p99_ms is None else f"{s.lag_p99_ms:.1f}"
                print(f"{tool} | {i} | {s.offered:g} | {s.seen}/{s.sent} | {achieved} | "
                      f"{lag} | {'yes' if s.sustained else 'no'}"
                      + (f" ({s.note})" if s.note else ""))
    for tool, climbs in result.items():
        tops = [max((s.offered for s in steps if s.sustained), default=0.0)
                for steps in climbs]
        arms = arms_of(tool)
        each = ", ".join(f"{t:g}" for t in tops)
        median = statistics.median(tops)
        extra = f" ({median * arms:g} arm-requests/s)" if arms > 1 else ""
        print(f"{tool}: highest sustained per climb {each}/s; median {median:g}/s{extra}")
