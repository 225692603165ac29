"""Who measures right and who costs less: every load generator against the same echo
server of known behaviour (tests/support/echo_server.py: a fixed time to first token and
per token, no slot limit), at the same offered rates, each tool's TTFT / ITL / E2E
percentiles beside what the server itself saw (its `--timeline`), and the CPU each tool's
processes spent per request. Peers are installed on first use, each in a venv of its own
(benchmarks/peers/venvs.py).

    python benchmarks/peers/side_by_side.py [--tools layergate,aiperf,...] [--rates 2,8]
        [--requests 60] [--cost-requests 30,150] [--json FILE]

A fresh server per run, so a run's truth is its own requests only. The client's cost is
split into what a run costs whatever its size (start-up: imports, worker processes,
tokenizing a prompt corpus) and what each more request costs: each tool runs twice more at
the highest rate, with the two `--cost-requests` counts, and the difference in CPU over
the difference in requests is the cost per request.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's rigs

from benchmarks.peers import venvs  # noqa: E402
from benchmarks.peers.common import QUANTILES, Load, Measured, Truth, read_truth  # noqa: E402
from tests.support.echo import echo_server  # noqa: E402

ADAPTERS = {"layergate": "benchmarks.peers.layergate", "aiperf": "benchmarks.peers.aiperf",
            "guidellm": "benchmarks.peers.guidellm",
            "inference-perf": "benchmarks.peers.inference_perf",
            "vllm-bench": "benchmarks.peers.vllm_bench"}
FIRST_TOKEN_S, TOKEN_S = 0.1, 0.02
TOKENIZER = Path.home() / ".cache" / "layergate" / "models" / "smollm2-135m"


@dataclasses.dataclass(frozen=True)
class Row:
    tool: str
    rate: float
    measured: Measured
    truth: Truth

    def errors_ms(self, name: str) -> dict[int, float | None]:
        got, true = getattr(self.measured, name), getattr(self.truth, name)
        return {q: (got[q] - true[q]) * 1000 if q in got and q in true else None
                for q in QUANTILES}


def one_run(tool: str, rate: float, args: argparse.Namespace, work: Path) -> Row:
    adapter = importlib.import_module(ADAPTERS[tool])
    venv = venvs.ensure(adapter) if hasattr(adapter, "INSTALL") else None
    timeline = work / "timeline.jsonl"
    load = Load(url="", model="echo", rate=rate, requests=args.requests,
                prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
                tokenizer=TOKENIZER, seed=args.seed)
    with echo_server("--token-delay", str(TOKEN_S), "--first-token-delay", str(FIRST_TOKEN_S),
                     "--timeline", str(timeline)) as url:
        started = time.time()
        measured = adapter.run(dataclasses.replace(load, url=url), work / "out", venv)
    return Row(tool, rate, measured, read_truth(timeline, since=started))


def _fresh(path: Path) -> Path:
    path.mkdir()
    return path


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


def print_cost(pairs: dict[str, tuple[Row, Row]]) -> None:
    print("client CPU: fixed per run, and per request the server saw (the slope between "
          "two run sizes)")
    print("tool | rate | requests | cpu s | fixed s | ms per request")
    for tool, (small, large) in pairs.items():
        n1, n2 = small.truth.requests, large.truth.requests
        slope = (large.measured.cpu_s - small.measured.cpu_s) / max(n2 - n1, 1)
        fixed = small.measured.cpu_s - slope * n1
        print(f"{tool} | {large.rate:g} | {n1}, {n2} | {small.measured.cpu_s:.2f}, "
              f"{large.measured.cpu_s:.2f} | {fixed:.2f} | {slope * 1000:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", default=",".join(ADAPTERS))
    parser.add_argument("--rates", default="2,8")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--cost-requests", default="30,150",
                        help="two run sizes whose CPU difference is the cost per request")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    tools = args.tools.split(",")
    unknown = sorted(set(tools) - set(ADAPTERS))
    if unknown:
        parser.error(f"--tools: unknown {unknown}; known: {', '.join(ADAPTERS)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="layergate-peers-") as tmp:
        for rate in (float(r) for r in args.rates.split(",")):
            for tool in tools:
                work = Path(tmp) / f"{tool}-{rate:g}"
                work.mkdir()
                rows.append(one_run(tool, rate, args, work))
                print(f"{tool} at {rate:g}/s: done", file=sys.stderr)
        top = max(r.rate for r in rows)
        sizes = [int(n) for n in args.cost_requests.split(",")]
        cost = {}
        for tool in tools:
            cost[tool] = tuple(
                one_run(tool, top, argparse.Namespace(**{**vars(args), "requests": n}),
                        _fresh(Path(tmp) / f"cost-{tool}-{n}")) for n in sizes)
            print(f"{tool} cost runs: done", file=sys.stderr)
    print_table(rows)
    print()
    print_cost(cost)
    if args.json:
        args.json.write_text(json.dumps({
            "rows": [dataclasses.asdict(r) for r in rows],
            "cost": {t: [dataclasses.asdict(r) for r in pair] for t, pair in cost.items()}},
            indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
