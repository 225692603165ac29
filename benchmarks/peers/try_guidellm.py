"""GuideLLM's figures beside the echo server's own timeline: two Poisson rates against a
server of known behaviour (0.1 s to the first token, then 0.02 s a token, no slots).

    PYTHONPATH=. /work/main/.venv/bin/python benchmarks/peers/try_guidellm.py \
        [--venv ~/.cache/layergate/peers/guidellm-0.8.1] [--rates 2 8] [--requests 60] \
        [--workers N|default] [--keep DIR]

`--workers` is GuideLLM's worker processes (default 1, see guidellm.WORKERS; `default`: the
tool's own, 10). `--keep DIR` leaves each run's report in DIR/rate-R/ (else a temporary
directory).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks.peers import guidellm
from benchmarks.peers.common import QUANTILES, Load, Measured, Truth, read_truth
from tests.support.echo import echo_server

VENV = Path.home() / ".cache/layergate/peers" / f"guidellm-{guidellm.VERSION}"
TOKENIZER = Path.home() / ".cache/layergate/models/smollm2-135m"


def _row(name: str, figures: dict[int, float]) -> str:
    return f"  {name:<12}" + "".join(f"{figures.get(q, float('nan')) * 1e3:>10.1f}"
                                     for q in QUANTILES)


def show(rate: float, m: Measured, truth: Truth) -> None:
    print(f"rate {rate:g} req/s: {m.ok} ok (server saw {truth.requests}), "
          f"cpu {m.cpu_s:.2f} s = {m.cpu_s / max(m.ok, 1) * 1e3:.1f} ms/request, "
          f"wall {m.wall_s:.1f} s")
    print(f"  {'ms':<12}" + "".join(f"{'p' + str(q):>10}" for q in QUANTILES))
    for name in ("ttft", "itl", "e2e"):
        print(_row(f"{name} tool", getattr(m, name)))
        print(_row(f"{name} truth", getattr(truth, name)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=VENV)
    parser.add_argument("--rates", type=float, nargs="+", default=[2.0, 8.0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--workers", default=str(guidellm.WORKERS))
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="layergate-guidellm-"))
    root.mkdir(parents=True, exist_ok=True)
    timeline = root / "timeline.jsonl"
    with echo_server("--token-delay", "0.02", "--first-token-delay", "0.1",
                     "--timeline", str(timeline)) as url:
        for rate in args.rates:
            load = Load(url=url, model="echo", rate=rate, requests=args.requests,
                        prompt_tokens=32, output_tokens=16, tokenizer=TOKENIZER)
            start = time.time()
            workers = None if args.workers == "default" else int(args.workers)
            m = guidellm.run(load, root / f"rate-{rate:g}", args.venv, workers=workers)
            show(rate, m, read_truth(timeline, since=start))
    print(f"reports under {root}")


if __name__ == "__main__":
    main()
