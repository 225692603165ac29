"""AIPerf's figures beside the echo server's own timeline, at 2 and 8 requests/s (60 requests,
32 prompt tokens, 16 output tokens; first token after 100 ms, then one every 20 ms), and the
CPU its processes spent per request. The venv is the one benchmarks/peers/aiperf.py INSTALL
makes (default ~/.cache/layergate/peers/aiperf-0.13.0).

    python benchmarks/peers/try_aiperf.py [--venv DIR] [--rates 2,8] [--requests 60]
        [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # run as a script: the checkout's rigs

from benchmarks.peers import aiperf  # noqa: E402
from benchmarks.peers.common import QUANTILES, Load, Measured, Truth, read_truth  # noqa: E402
from tests.support.echo import echo_server  # noqa: E402

CACHE = Path.home() / ".cache" / "layergate"


def one(rate: float, args: argparse.Namespace, work: Path) -> tuple[Measured, Truth]:
    work.mkdir(parents=True, exist_ok=True)
    timeline = work / "timeline.jsonl"
    with echo_server("--token-delay", "0.02", "--first-token-delay", "0.1",
                     "--timeline", str(timeline)) as url:
        load = Load(url=url, model="echo", rate=rate, requests=args.requests,
                    prompt_tokens=32, output_tokens=16,
                    tokenizer=CACHE / "models" / "smollm2-135m")
        start = time.time()
        measured = aiperf.run(load, work / "out", args.venv)
    return measured, read_truth(timeline, since=start)


def show(rate: float, m: Measured, t: Truth) -> None:
    print(f"\nrate {rate:g}/s: aiperf ok {m.ok}, server saw {t.requests}; "
          f"cpu {m.cpu_s:.2f} s = {m.cpu_s * 1000 / max(m.ok, 1):.1f} ms/request, "
          f"wall {m.wall_s:.1f} s")
    print(f"{'ms':>8} " + " ".join(f"{f'p{q} tool':>9} {'truth':>7}" for q in QUANTILES))
    for name in ("ttft", "itl", "e2e"):
        got, true = getattr(m, name), getattr(t, name)
        print(f"{name:>8} " + " ".join(f"{got[q] * 1000:9.1f} {true[q] * 1000:7.1f}"
                                       for q in QUANTILES))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=CACHE / "peers" / "aiperf-0.13.0")
    parser.add_argument("--rates", default="2,8")
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--keep", type=Path, default=None, help="leave the outputs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="try-aiperf-") as tmp:
        base = args.keep or Path(tmp)
        for rate in (float(r) for r in args.rates.split(",")):
            m, t = one(rate, args, base / f"rate-{rate:g}")
            show(rate, m, t)
        print("\n" + "\n".join(m.notes))


if __name__ == "__main__":
    main()
