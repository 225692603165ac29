"""Section `capacity` of the side-by-side: every tool's own capacity search on two echo
servers of known capacity (tests/support/echo_server.py `--slots N`, 4 against 6 by default:
an M/D/c queue, one token every 0.1 s, 4 tokens a request), under one SLO, TTFT <= 500 ms
for 90 % of the requests. The truth is the M/D/c steady state at that SLO
(tests/support/slots.py `true_capacity`: the wait for a slot <= the limit less the first
token's 0.1 s); the table puts each tool's capacity on each server and its candidate /
baseline ratio beside the known ones.

Each tool answers with its own search and its own figures; the rule that turns them into
one rate is the tool's where it has one, else the same one for all (`RULES`):
- layergate: `layergate capacity` (its ladder and per-step judge), its `capacity_ratio`;
- GuideLLM: its `sweep` profile; a step passes when its TTFT p90 is within the limit;
- vllm bench: `vllm bench sweep serve` over a grid of rates with `--goodput ttft:500`; a
  step passes when its goodput / throughput is at least the attainment;
- AIPerf: its own search over the request rate under `--search-sla
  time_to_first_token:p90:lt:500`; its `feasible_max`;
- inference-perf: its `load.sweep` (a saturation probe, then stages up to it) with goodput
  constraints; a stage passes when its goodput share is at least the attainment.
Where a tool gives steps, its capacity is the highest rate that passed below the lowest
that did not (`highest_passing`).
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.peers import layergate as layergate_adapter
from benchmarks.peers.common import TOKENIZER, Load, fresh, read_json
from benchmarks.peers.errors import adapter_of
from layergate.harness.processes import layergate_command
from tests.support.echo import echo_server
from tests.support.slots import true_capacity

TOKEN_S, TOKENS, PROMPT_TOKENS = 0.1, 4, 32
LIMIT_S, ATTAINMENT = 0.5, 0.9

RULES = {
    "layergate": "`layergate capacity` ladder (x2 from 5/s, 2 bisections, 5 s steps): the "
                 "highest step it passed (TTFT <= 500 ms for >= 90 %, per-step judge)",
    "guidellm": "GuideLLM `sweep` profile (synchronous, throughput, Poisson rates between): "
                "the highest Poisson rate whose TTFT p90 <= 500 ms, below the lowest that "
                "failed; steps it warned root_late (schedule lost) left out",
    "vllm-bench": "`vllm bench sweep serve` over the grid, `--goodput ttft:500`: the highest "
                  "rate whose goodput / throughput >= 0.9, below the lowest that failed",
    "aiperf": "AIPerf's rate search (Optuna) under `--search-sla "
              "time_to_first_token:p90:lt:500`: its feasible_max (the highest feasible "
              "rate it tried, even above an infeasible one)",
    "inference-perf": "inference-perf `load.sweep` (saturation probe, then linear stages up "
                      "to it), goodput ttft 0.5 s: the highest stage rate with goodput share "
                      ">= 0.9, below the lowest that failed",
}
# what a tool's own capacity search cannot say about this SLO (printed under the table)
CANNOT = {
    "guidellm": "GuideLLM's `goodput` profile takes the SLO and attainment, but searches "
                "concurrency (closed-loop streams), not a Poisson rate: not this SLO",
    "aiperf": "AIPerf's recipes (max-goodput-under-slo) search concurrency; the rate search "
              "is spelled out with --search-space",
    "vllm-bench": "vllm bench 0.32 has no SLO search, only a grid (`sweep serve`): its "
                  "resolution is the grid's",
    "inference-perf": "inference-perf has no search on the rate, only stages up to its probe's "
                      "saturation figure: its resolution is the stages'",
}


@dataclasses.dataclass(frozen=True)
class Found:
    """One tool's answer on one server: the rate its rule picked (None: nothing passed)
    and each rate it tried with whether it met the SLO, as it reported them."""

    capacity: float | None
    tried: tuple[tuple[float, bool], ...]
    wall_s: float
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Row:
    tool: str
    found: dict[int, Found]  # slots -> the tool's answer on that server
    truth: dict[int, float]  # slots -> the M/D/c capacity at the SLO
    ratio: float | None  # the tool's candidate / baseline (layergate's own figure for it)

    @property
    def true_ratio(self) -> float:
        base, cand = self.truth.values()
        return cand / base


def truths(slots: Sequence[int], token_s: float = TOKEN_S, tokens: int = TOKENS,
           limit_s: float = LIMIT_S, attainment: float = ATTAINMENT) -> dict[int, float]:
    """Each server's true capacity: TTFT = the wait for a slot + one token."""
    return {n: true_capacity(n, token_s * tokens, limit_s - token_s, attainment)
            for n in slots}


def highest_passing(tried: Sequence[tuple[float, bool]]) -> float | None:
    """The highest rate that passed below the lowest that failed (a pass above a failure
    is noise, not capacity); None when the lowest rate failed or nothing was tried."""
    failed = [r for r, ok in tried if not ok]
    ceiling = min(failed) if failed else float("inf")
    passed = [r for r, ok in tried if ok and r < ceiling]
    return max(passed) if passed else None


def met_goodput(points: Sequence[Any]) -> tuple[tuple[float, bool], ...]:
    """vllm bench's sweep points as (rate, met): goodput / throughput is the share of the
    completed requests that met every `--goodput` SLO."""
    return tuple((p.rate, p.throughput > 0 and p.goodput / p.throughput >= ATTAINMENT)
                 for p in points)


def ratio_of(found: dict[int, Found]) -> float | None:
    base, cand = (f.capacity for f in found.values())
    return cand / base if base and cand else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--capacity-slots", default="4,6",
                        help="slots of the baseline and the candidate server")
    parser.add_argument("--capacity-requests", type=int, default=30,
                        help="requests per step of a peer's search")
    parser.add_argument("--capacity-rates", default="5,7.5,10,12.5,15",
                        help="vllm bench's grid; its ends bound AIPerf's search")
    parser.add_argument("--capacity-steps", type=int, default=6,
                        help="GuideLLM sweep size; inference-perf stages (less 2)")
    parser.add_argument("--capacity-iterations", type=int, default=6,
                        help="AIPerf search iterations")
    parser.add_argument("--capacity-stage-s", type=int, default=5,
                        help="inference-perf stage duration (whole seconds)")


def _load(url: str, args: argparse.Namespace) -> Load:
    return Load(url=url, model="echo", rate=1.0, requests=args.capacity_requests,
                prompt_tokens=PROMPT_TOKENS, output_tokens=TOKENS, tokenizer=TOKENIZER,
                seed=args.seed)


# --- each tool's search on one server ------------------------------------------------------

def _guidellm(adapter: Any, venv: Path, load: Load, args: argparse.Namespace,
              work: Path) -> Found:
    steps = adapter.sweep(load, work, venv, size=args.capacity_steps)
    doc = adapter.read_report(work / adapter.REPORT)
    tried, late = [], []
    for (kind, rate, lost), m in zip(adapter.sweep_rates(doc), steps, strict=True):
        if rate is None or kind in ("synchronous", "throughput"):
            continue
        (late if lost else tried).append((rate, m.ttft[90] <= LIMIT_S))
    note = (f"left out, GuideLLM warned root_late (sent at once): "
            f"{', '.join(f'{r:.2f}' for r, _ in late)}") if late else ""
    return Found(highest_passing(tried), tuple(tried), steps[0].wall_s, note)


def _vllm(adapter: Any, venv: Path, load: Load, args: argparse.Namespace, work: Path) -> Found:
    started = time.monotonic()
    rates = [float(r) for r in args.capacity_rates.split(",")]
    points = adapter.slo_search(load, work, venv, rates, {"ttft": LIMIT_S * 1000})
    tried = met_goodput(points)
    return Found(highest_passing(tried), tried, time.monotonic() - started)


def _aiperf(adapter: Any, venv: Path, load: Load, args: argparse.Namespace,
            work: Path) -> Found:
    rates = [float(r) for r in args.capacity_rates.split(",")]
    got = adapter.slo_search(load, {"time_to_first_token:p90": LIMIT_S * 1000}, min(rates),
                             max(rates), work, venv, iterations=args.capacity_iterations,
                             initial=min(3, args.capacity_iterations))
    return Found(got.feasible_max, got.iterations, got.wall_s,
                 note=f"converged: {got.convergence}; breach: {got.breach}")


def _inference_perf(adapter: Any, venv: Path, load: Load, args: argparse.Namespace,
                    work: Path) -> Found:
    # a probe of 100 requests in its 5 s offers 20/s, above either server's c / S
    stages = adapter.sweep(load, work, venv, stages=max(args.capacity_steps - 2, 2),
                           stage_duration=args.capacity_stage_s, probe_requests=100,
                           slo={"ttft": LIMIT_S})
    tried = tuple((g.requested_rate, g.share >= ATTAINMENT)
                  for g in adapter.stage_goodputs(work / "reports"))
    return Found(highest_passing(tried), tried, stages[0].wall_s)


PEERS = {"guidellm": _guidellm, "vllm-bench": _vllm, "aiperf": _aiperf,
         "inference-perf": _inference_perf}


def _layergate(urls: dict[int, str], args: argparse.Namespace, work: Path
               ) -> tuple[dict[int, Found], float | None]:
    """One `layergate capacity` of both servers at once (baseline, candidate), its own
    capacity per arm and its capacity ratio, from capacity-report.json."""
    (base, base_url), (cand, cand_url) = urls.items()
    load = dataclasses.replace(_load(base_url, args), requests=16)
    traffic = layergate_adapter.traffic(load, work / "traffic.jsonl")
    out = work / "sweep"
    started = time.monotonic()
    # exit 3 (an arm without an exact capacity) is an answer too: the report says which
    subprocess.run(layergate_command(
        "capacity", "--traffic", str(traffic), "--baseline", base_url, "--candidate", cand_url,
        "--out", str(out), "--start", "5", "--factor", "2", "--bisections", "2",
        "--warmup", "2", "--min-duration", "5", "--min-requests", "30",
        "--max-in-flight", "64", "--resamples", "200", "--seed", str(args.seed),
        "--slo", f"ttft:{LIMIT_S * 1000:g}ms", "--slo-attainment", str(ATTAINMENT),
        "--no-progress"), cwd=work, capture_output=True, timeout=1800)
    wall = time.monotonic() - started
    return read_layergate(out / "capacity-report.json", base, cand, wall)


def read_layergate(path: Path, base: int, cand: int, wall_s: float = 0.0
                   ) -> tuple[dict[int, Found], float | None]:
    """Each arm's capacity and steps, and the ratio, as `layergate capacity` wrote them."""
    report = read_json(path, "layergate capacity")
    try:
        arms = report["arms"]
        found = {n: Found(arms[arm]["capacity"],
                          tuple((s["load"], bool(s["passed"])) for s in arms[arm]["steps"]),
                          wall_s, note=arms[arm]["text"])
                 for n, arm in ((base, "baseline"), (cand, "candidate"))}
        ratio = next((f["value"] for f in report["figures"] if f["name"] == "capacity_ratio"),
                     None)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not layergate's capacity report ({exc!r})") from exc
    return found, ratio


def measure(args: argparse.Namespace, tools: list[str], work: Path) -> list[Row]:
    slots = [int(n) for n in args.capacity_slots.split(",")]
    if len(slots) != 2:
        raise SystemExit(f"--capacity-slots: two servers (baseline,candidate), not {slots}")
    truth = truths(slots)
    rows = []
    for tool in tools:
        began = time.monotonic()
        with ExitStack() as stack:  # fresh servers for each tool: no queue left behind
            urls = {n: stack.enter_context(echo_server("--token-delay", str(TOKEN_S),
                                                       "--slots", str(n))) for n in slots}
            if tool == "layergate":
                found, ratio = _layergate(urls, args, fresh(work / tool))
            else:
                adapter, venv = adapter_of(tool)
                found = {n: PEERS[tool](adapter, venv, _load(url, args), args,
                                        fresh(work / f"{tool}-{n}"))
                         for n, url in urls.items()}
                ratio = ratio_of(found)
        rows.append(Row(tool, found, truth, ratio))
        print(f"capacity: {tool} done ({time.monotonic() - began:.0f} s)", file=sys.stderr)
    return rows


def _rate(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def print_table(rows: list[Row]) -> None:
    if not rows:
        return
    (base, t_base), (cand, t_cand) = rows[0].truth.items()
    true_ratio = rows[0].true_ratio
    print(f"capacity against truth: echo servers of {base} and {cand} slots, "
          f"{TOKENS} tokens of {TOKEN_S * 1000:g} ms; SLO TTFT <= {LIMIT_S * 1000:g} ms for "
          f">= {ATTAINMENT:.0%}; truth (M/D/c steady state) {t_base:.2f} and {t_cand:.2f} "
          f"req/s, ratio {true_ratio:.3f}")
    print(f"tool | {base} slots (true {t_base:.2f}) | {cand} slots (true {t_cand:.2f}) | "
          f"ratio (true {true_ratio:.3f}) | ratio error | wall s | rule")
    for r in rows:
        b, c = r.found[base], r.found[cand]
        error = "—" if r.ratio is None else f"{(r.ratio / true_ratio - 1) * 100:+.1f} %"
        wall = b.wall_s if r.tool == "layergate" else b.wall_s + c.wall_s
        print(f"{r.tool} | {_rate(b.capacity)} | {_rate(c.capacity)} | {_rate(r.ratio)} | "
              f"{error} | {wall:.0f} | {RULES[r.tool]}")
    for r in rows:
        for n, f in r.found.items():
            steps = ", ".join(f"{rate:g}{'+' if ok else '-'}" for rate, ok in f.tried)
            print(f"{r.tool} @ {n} slots tried (+ met the SLO): {steps}"
                  + (f"; {f.note}" if f.note else ""))
        if r.tool in CANNOT:
            print(f"{r.tool}: {CANNOT[r.tool]}")

