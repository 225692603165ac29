"""`vllm bench serve` (benchmarks/peers/vllm_bench.py) against the echo server of known
behaviour, its figures beside the server's own timeline (`common.read_truth`).

    PYTHONPATH=. .venv/bin/python benchmarks/peers/try_vllm_bench.py [--rates 2 8]
        [--requests 60] [--venv DIR] [--tokenizer DIR] [--keep DIR]

The echo server waits 0.1 s before the first token and 0.02 s before each next one, no
slots (so no queueing). The tool's venv is the one INSTALL and `prepare` made (default
~/.cache/layergate/peers/vllm-bench-0.32.0). `--keep DIR` copies each run's result file
there (as rate-R.json).

Measured on the 2-core machine (2026-12-03, 60 requests a rate; ms, tool / truth):

    rate 2:  ttft p50 104.2/101.9  p99 111.0/106.5   itl p50 20.9/21.0  p99 24.8/22.5
             e2e  p50 418.9/416.0  p99 442.4/440.4   cpu 140 ms/request
    rate 8:  ttft p50 102.8/101.2  p99 106.9/104.6   itl p50 20.9/20.9  p99 24.3/21.7
             e2e  p50 416.9/415.1  p99 430.7/428.8   cpu 163 ms/request

Most of the CPU is the tool's start (importing vllm and torch: about 8.5 s a run).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.peers import vllm_bench
from benchmarks.peers.common import QUANTILES, Load, Measured, Truth, read_truth
from tests.support.echo import echo_server

CACHE = Path.home() / ".cache" / "layergate"
VENV = CACHE / "peers" / f"vllm-bench-{vllm_bench.VERSION}"
TOKENIZER = CACHE / "models" / "smollm2-135m"
ECHO = ("--token-delay", "0.02", "--first-token-delay", "0.1")


def table(rate: float, tool: Measured, truth: Truth) -> str:
    rows = [f"rate {rate:g} req/s: {tool.ok} ok (server saw {truth.requests}), "
            f"cpu {tool.cpu_s * 1000 / max(tool.ok, 1):.1f} ms/request, "
            f"wall {tool.wall_s:.1f} s",
            f"  {'ms':<6}" + "".join(f"{f'p{q} tool':>11}{f'p{q} truth':>11}"
                                     for q in QUANTILES)]
    for name in ("ttft", "itl", "e2e"):
        ours, theirs = getattr(tool, name), getattr(truth, name)
        rows.append(f"  {name:<6}" + "".join(f"{ours[q] * 1000:>11.2f}{theirs[q] * 1000:>11.2f}"
                                             for q in QUANTILES))
    return "\n".join(rows + [f"  note: {n}" for n in tool.notes])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[2.0, 8.0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--venv", type=Path, default=VENV)
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="layergate-vllm-bench-") as tmp:
        timeline = Path(tmp) / "timeline.jsonl"
        with echo_server(*ECHO, "--timeline", str(timeline)) as url:
            for rate in args.rates:
                load = Load(url=url, model="echo", rate=rate, requests=args.requests,
                            prompt_tokens=32, output_tokens=16, tokenizer=args.tokenizer)
                start = time.time()
                tool = vllm_bench.run(load, Path(tmp) / f"rate-{rate:g}", args.venv)
                print(table(rate, tool, read_truth(timeline, since=start)), flush=True)
                if args.keep:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    shutil.copy(tool.raw, args.keep / f"rate-{rate:g}.json")


if __name__ == "__main__":
    main()
