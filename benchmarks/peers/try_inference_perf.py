"""inference-perf's figures beside the echo server's own timeline: at each --rates, one run of
the adapter (benchmarks/peers/inference_perf.py) against an echo server of 0.1 s to the first
token and 0.02 s per token after it, printed as tool vs truth p50/p90/p99, with the tool's
CPU per request.

    PYTHONPATH=. .venv/bin/python benchmarks/peers/try_inference_perf.py \\
        --venv ~/.cache/layergate/peers/inference-perf-0.7.0 [--rates 2 8] [--requests 60] \\
        [--keep DIR]

--keep DIR keeps each run's work folder (the tool's config, log and reports) under DIR.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.peers import inference_perf
from benchmarks.peers.common import QUANTILES, Load, Measured, Truth, read_truth
from tests.support.echo import echo_server

TOKENIZER = Path.home() / ".cache/layergate/models/smollm2-135m"


def row(name: str, tool: dict[int, float], truth: dict[int, float]) -> str:
    cells = "  ".join(f"{tool.get(q, float('nan')):7.4f} {truth.get(q, float('nan')):7.4f}"
                      for q in QUANTILES)
    return f"  {name:<5} {cells}"


def show(rate: float, m: Measured, truth: Truth) -> None:
    head = "  ".join(f"p{q} tool   truth" for q in QUANTILES)
    print(f"rate {rate:g}/s: ok {m.ok} (server saw {truth.requests}), wall {m.wall_s:.1f} s, "
          f"cpu {m.cpu_s:.2f} s = {1000 * m.cpu_s / max(m.ok, 1):.1f} ms/request")
    print(f"  {'':<5} {head}")
    print(row("ttft", m.ttft, truth.ttft))
    print(row("itl", m.itl, truth.itl))
    print(row("e2e", m.e2e, truth.e2e))
    for note in m.notes:
        print(f"    - {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--rates", type=float, nargs="+", default=[2.0, 8.0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="peer-inference-perf-"))
    work_root = args.keep or scratch
    timeline = scratch / "timeline.jsonl"
    with echo_server("--token-delay", "0.02", "--first-token-delay", "0.1",
                     "--timeline", str(timeline)) as url:
        for rate in args.rates:
            load = Load(url=url, model="echo", rate=rate, requests=args.requests,
                        prompt_tokens=32, output_tokens=16, tokenizer=TOKENIZER)
            start = time.time()
            m = inference_perf.run(load, work_root / f"rate-{rate:g}", args.venv)
            show(rate, m, read_truth(timeline, since=start))


if __name__ == "__main__":
    main()
