"""Reference-engine throughput, measured side by side in one run on the real SmolLM2.

1. decode tokens/s at batch 1: the engine vs Hugging Face `generate` on the same prompts
   (greedy, the same tokens), each timed end to end at N tokens and at 1 token, so the
   prefill cancels out: decode rate = (N - 1) / (t_N - t_1);
2. aggregate tokens/s through `layergate serve` over HTTP at concurrency 1, 4 and 8;
3. padding efficiency (real / computed token positions) of a mixed-length burst under
   `--padding bucketed` and `--padding max`.

    .venv/bin/python benchmarks/engine_throughput.py --threads 1 --tokens 32
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
from engine_calls import greedy_request
from prometheus_client import CollectorRegistry

from layergate.harness.stack import engines

PROMPTS = ["Tell me about the moon.", "Write a short poem about rain.",
           "Explain what a CPU cache is.", "Give three tips for learning to cook.",
           "Describe a walk in a pine forest.", "What makes a good friend?",
           "Summarise the plot of a heist film.", "How do bees make honey?"]
SHORT = ["Hi!", "Why?", "Name a colour.", "2 + 2 = ?"]
LONG = ["Here is some background. " * 40 + "Now summarise it.",
        "Consider the following list: " + ", ".join(f"item {i}" for i in range(120)) + "."]


# ---------------------------------------------------------------- engine vs HF, batch 1

def engine_generate(engine, ids: list[int], max_tokens: int) -> tuple[list[int], float]:
    extension, elapsed = greedy_request(engine, ids, max_tokens, timeout=300)
    return extension["token_ids"], elapsed


def hf_generate(model, ids: list[int], max_tokens: int) -> tuple[list[int], float]:
    import torch

    x = torch.tensor([ids])
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_tokens,
                             do_sample=False, pad_token_id=2)
    elapsed = time.perf_counter() - start
    return out[0, len(ids):].tolist(), elapsed


def decode_rate(run, ids: list[int], tokens: int, repeats: int) -> tuple[float, int]:
    """Tokens/s of decode alone: the median of (N - 1) / (t_N - t_1)."""
    rates, produced = [], 0
    for _ in range(repeats):
        _, t1 = run(ids, 1)
        out, tn = run(ids, tokens)
        produced = len(out)
        if produced > 1 and tn > t1:
            rates.append((produced - 1) / (tn - t1))
    return (statistics.median(rates) if rates else float("nan")), produced


def batch1(args) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from layergate.reference_engine.config import EngineConfig
    from layergate.reference_engine.engine import Engine
    from layergate.reference_engine.loading import ensure_converted

    torch.set_num_threads(args.threads)
    engine = Engine(EngineConfig(threads=args.threads, prefix_cache="off"), CollectorRegistry())
    engine.start()
    hf = AutoModelForCausalLM.from_pretrained(ensure_converted(), dtype=torch.float32).eval()
    tok = engine.tokenizer
    print(f"\n1. decode tokens/s at batch 1 ({args.tokens} tokens, greedy, {args.threads} "
          f"thread(s), median of {args.repeats})")
    print(f"{'prompt':<40} {'engine':>8} {'HF':>8} {'ratio':>6}  same tokens")
    ratios = []
    try:
        for prompt in PROMPTS[:args.prompts]:
            ids = tok.apply_chat_template([{"role": "user", "content": prompt}],
                                          add_generation_prompt=True, tokenize=False)
            ids = tok(ids, add_special_tokens=False)["input_ids"]
            e_out, _ = engine_generate(engine, ids, args.tokens)
            h_out, _ = hf_generate(hf, ids, args.tokens)
            e_rate, _ = decode_rate(lambda i, n: engine_generate(engine, i, n), ids,
                                    args.tokens, args.repeats)
            h_rate, _ = decode_rate(lambda i, n: hf_generate(hf, i, n), ids, args.tokens,
                                    args.repeats)
            ratios.append(e_rate / h_rate)
            print(f"{prompt[:40]:<40} {e_rate:8.1f} {h_rate:8.1f} {e_rate / h_rate:6.2f}  "
                  f"{e_out == h_out[:len(e_out)] and len(e_out) > 0}")
    finally:
        engine.shutdown(drain=False)
    print(f"engine / HF decode rate: median ratio {statistics.median(ratios):.2f}")


# ---------------------------------------------------------------- HTTP concurrency

@contextlib.contextmanager
def served(*flags: str, threads: int) -> Iterator[str]:
    with engines.engine("--max-batch-size", "8", *flags, threads=threads, timeout=300) as proc:
        yield proc.url


def _chat(url: str, prompt: str, max_tokens: int) -> int:
    r = httpx.post(f"{url}/v1/chat/completions", timeout=600, json={
        "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
        "temperature": 0})
    r.raise_for_status()
    return r.json()["usage"]["completion_tokens"]


def aggregate(url: str, concurrency: int, requests: int, tokens: int) -> float:
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(requests)]
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        produced = sum(pool.map(lambda p: _chat(url, p, tokens), prompts))
    return produced / (time.perf_counter() - start)


def http_concurrency(args) -> None:
    print(f"\n2. aggregate tokens/s through the HTTP server ({args.requests} requests x "
          f"{args.tokens} tokens, max batch 8)")
    with served("--prefix-cache", "off", threads=args.threads) as url:
        _chat(url, "warm up", 4)
        rates = {c: aggregate(url, c, args.requests, args.tokens) for c in (1, 4, 8)}
    for c, rate in rates.items():
        print(f"concurrency {c}: {rate:7.1f} tok/s")
    print(f"ratio 8 vs 1: {rates[8] / rates[1]:.2f}x")


# ---------------------------------------------------------------- padding efficiency

def _counter(url: str, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name)


def padding(args) -> None:
    print("\n3. padding efficiency of a mixed-length burst (real / computed token positions)")
    load = (SHORT + LONG) * 2
    for mode in ("bucketed", "max"):
        with served("--padding", mode, "--prefix-cache", "off", threads=args.threads) as url:
            real0 = _counter(url, "layergate_real_tokens_total")
            comp0 = _counter(url, "layergate_computed_tokens_total")
            start = time.perf_counter()
            with ThreadPoolExecutor(len(load)) as pool:
                produced = sum(pool.map(lambda p: _chat(url, p, 8), load))
            wall = time.perf_counter() - start
            real = _counter(url, "layergate_real_tokens_total") - real0
            comp = _counter(url, "layergate_computed_tokens_total") - comp0
        print(f"--padding {mode:<8}: efficiency {real / comp:.3f} ({real:.0f} / {comp:.0f}), "
              f"{produced} tokens in {wall:.1f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per engine")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per request")
    parser.add_argument("--prompts", type=int, default=4, help="prompts for the batch-1 part")
    parser.add_argument("--repeats", type=int, default=3, help="timings per prompt (median)")
    parser.add_argument("--requests", type=int, default=16, help="requests per concurrency")
    parser.add_argument("--skip", choices=("batch1", "http", "padding"), action="append",
                        default=[], help="leave a part out")
    args = parser.parse_args()
    if "batch1" not in args.skip:
        batch1(args)
    if "http" not in args.skip:
        http_concurrency(args)
    if "padding" not in args.skip:
        padding(args)


if __name__ == "__main__":
    main()
