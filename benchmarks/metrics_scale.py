"""How long `compute_figures` takes for 10 k, 100 k and 1 M paired requests.

Synthetic but realistic records: three arms (baseline, baseline2, candidate), three
scenarios, streamed timings with inter-token gaps, token ids, texts that mostly agree, the
`layergate` extension; cache-hit scrapes. Prints one line per size, measured here:

    .venv/bin/python benchmarks/metrics_scale.py [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

from exporters.compute import compute_figures
from exporters.config import MetricsConfig
from exporters.records import ArmResult, MetricsScrape

WORDS = np.array("the a cat dog sat ran on under mat tree house red blue big small and".split())


def synthetic(n: int, seed: int = 0) -> list[ArmResult]:
    """n requests x 3 arms. Token ids, texts and gaps are shared between records that have
    the same ones, so 1 M requests fit in a few GB."""
    rng = np.random.default_rng(seed)
    outputs: dict[tuple[int, int, bool], tuple[tuple[int, ...], str]] = {}
    gaps: dict[tuple[float, int], tuple[float, ...]] = {}
    scen = rng.choice(["short", "medium", "long"], size=n)
    tokens = rng.integers(4, 33, size=n)
    out = []
    for arm, speed, agree in (("baseline", 1.0, 1.0), ("baseline2", 1.0, 0.97),
                              ("candidate", 0.8, 0.9)):
        ttft = rng.gamma(4, 0.01, size=n)
        tpot = rng.gamma(9, 0.004, size=n) * speed
        flip = rng.random(n) > agree
        ok = rng.random(n) > 0.005
        for i in range(n):
            k = int(tokens[i])
            key = (i % 50, k, bool(flip[i]))
            if key not in outputs:
                ids = tuple(range(i % 50, i % 50 + k))
                if flip[i]:
                    ids = ids[: k // 2] + tuple(x + 1 for x in ids[k // 2:])
                outputs[key] = ids, " ".join(WORDS[np.asarray(ids) % len(WORDS)])
            ids, text = outputs[key]
            gap = round(float(tpot[i]), 4)
            itl = gaps.setdefault((gap, k), (gap,) * (k - 1))
            out.append(ArmResult(
                request_id=f"r{i}", arm=arm, scenario=str(scen[i]), ok=bool(ok[i]),
                ttft_s=float(ttft[i]), e2e_s=float(ttft[i] + tpot[i] * (k - 1)),
                itl_s=itl, output_text=text, output_tokens=k,
                finish_reason="length" if k == 32 else "stop", max_tokens=32, token_ids=ids,
                prompt_tokens=20,
                extension={"theoretical_saving": 0.3 if arm == "candidate" else 0.0,
                           "computed_tokens": 20 - 3 + k - 1 + 2, "peak_memory_bytes": 10_000 + k,
                           "prefix_cache_hit_tokens": 3, "prefix_cache_query_tokens": 10}))
    return out


def scrape(arm: str, when: str, hits: float) -> MetricsScrape:
    text = (f"layergate_prefix_cache_hits_total{{policy=\"full\"}} {hits}\n"
            f"layergate_prefix_cache_queries_total{{policy=\"full\"}} {hits * 3}\n")
    return MetricsScrape(arm, when, "# TYPE layergate_prefix_cache_hits_total counter\n"
                         "# TYPE layergate_prefix_cache_queries_total counter\n" + text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--resamples", type=int, default=MetricsConfig().n_resamples)
    args = parser.parse_args()
    scrapes = [scrape(a, w, h) for a in ("baseline", "baseline2", "candidate")
               for w, h in (("before", 0.0), ("after", 900.0))]
    config = MetricsConfig(n_resamples=args.resamples)
    for n in (int(s) for s in args.sizes.split(",")):
        records = synthetic(n)
        start, cpu = time.perf_counter(), time.process_time()
        figures = compute_figures(records, scrapes, config=config)
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rer = next(f for f in figures if f.name == "rer" and f.scenario == "all"
                   and f.arm == "candidate")
        print(f"{n:>9} paired requests x 3 arms: {len(figures)} figures in {took:6.2f} s "
              f"(CPU {cpu:6.2f} s, load {os.getloadavg()[0]:.1f}) "
              f"({config.n_resamples} resamples; rer {rer.value:.3f} "
              f"[{rer.ci_low:.3f}, {rer.ci_high:.3f}]; peak RSS {peak:.0f} MiB)", flush=True)


if __name__ == "__main__":
    main()
