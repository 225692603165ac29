"""Layer-skipping policies at their calibrated points, side by side in one run, on the real
SmolLM2 and bundled traffic: decode tokens/s and TPOT against `full`, exact match against
`full`, theoretical vs realised saving, and for `speculative` the acceptance rate, tokens per
full-depth pass and the TPOT its measured acceptance and pass costs predict (no waste when
realised ~= predicted); plus the policy overhead (detector + decider) share.

Requests run one at a time (batch 1), prompt-major and policy-minor, so a busy machine slows
every policy alike; prefix cache off, so prefill is never served from cache.

    .venv/bin/python benchmarks/skip_speedup.py --threads 1 --prompts 8 --tokens 24
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from engine_calls import greedy_request

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Arm:
    name: str
    policy: str
    skip: tuple[int, ...] = ()
    note: str = ""
    engine: object = None
    results: list[dict] = field(default_factory=list)
    steps: int = 0  # decode() calls: full-depth passes of a speculative arm


def run(engine, ids, max_tokens: int) -> dict:
    extension, elapsed = greedy_request(engine, ids, max_tokens)
    return {**extension, "e2e_s": elapsed}


def counted(arm: Arm, decode):
    def wrapper(*args, **kwargs):
        arm.steps += 1
        return decode(*args, **kwargs)
    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traffic", default=str(ROOT / "scenarios/traffic/eval.jsonl"))
    ap.add_argument("--rules", default=str(ROOT / "scenarios/rules/smollm2-135m.json"))
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--static-k", type=int, default=4,
                    help="also run the k least influential layers removed (for scale)")
    args = ap.parse_args()

    import torch

    from layergate.reference_engine.calibration.prompts import load_prompts
    from layergate.reference_engine.calibration.sweep import Draft, measure_times
    from layergate.reference_engine.config import EngineConfig
    from layergate.reference_engine.engine import Engine
    from layergate.reference_engine.loading import load_model
    from layergate.reference_engine.skip_policies.rules import load_rules

    torch.set_num_threads(args.threads)
    loaded = load_model(EngineConfig(threads=args.threads))
    rules = load_rules(args.rules, model=loaded.name, num_layers=loaded.num_layers)
    ranking = list(rules.info.get("static", {}).get("ranking", []))
    traffic = load_prompts(args.traffic, loaded.tokenizer, max_prompts=args.prompts,
                           max_tokens=args.tokens, vocab_size=loaded.model.config.vocab_size)
    arms = [Arm("full", "full"),
            Arm("static", "static", rules.static_skip,
                "" if rules.static_skip else "calibrated set is empty: runs full depth"),
            Arm("dynamic", "dynamic", note="" if rules.dynamic else
                "calibrated rule table is empty: skips nothing"),
            Arm("speculative", "speculative")]
    if ranking and args.static_k:
        arms.insert(2, Arm(f"static-k{args.static_k}", "static",
                           tuple(sorted(ranking[:args.static_k])),
                           "k least influential layers, NOT calibrated: for scale"))
    for arm in arms:
        cfg = EngineConfig(threads=args.threads, skip_policy=arm.policy, rules=args.rules,
                           skip_layers=arm.skip if arm.policy == "static" else (),
                           batch_invariant=True, prefix_cache="off")
        arm.engine = Engine(cfg, loaded=loaded)
        arm.engine.skip_policy.decode = counted(arm, arm.engine.skip_policy.decode)
        arm.engine.start()
    print(f"{len(traffic.prompts)} prompts of {Path(args.traffic).name}, <= {args.tokens} "
          f"greedy tokens, batch 1, {args.threads} thread(s)")
    for i, prompt in enumerate(traffic.prompts):
        for arm in arms:
            arm.results.append(run(arm.engine, prompt.prompt_ids, prompt.max_tokens))
        print(f"  prompt {i + 1}/{len(traffic.prompts)} done", flush=True)
    spec = next(a for a in arms if a.name == "speculative")
    draft = rules.speculative
    longest = max(traffic.prompts, key=lambda p: len(p.prompt_ids))
    from layergate.reference_engine.calibration.reference import Reference

    ref = Reference(longest, tuple(arms[0].results[traffic.prompts.index(longest)]["token_ids"])
                    or (0,))
    d = Draft(draft.skip, draft.exit_after, draft.head_tokens)
    times = measure_times(arms[0].engine.runner, ref, [d], [draft.gamma + 1])
    for arm in arms:
        arm.engine.shutdown()
    report(arms, spec, times, d, draft.gamma)


def report(arms, spec, times, draft, gamma) -> None:
    full = arms[0]

    def decode_stats(arm):
        toks = sum(max(len(r["token_ids"]) - 1, 0) for r in arm.results)
        secs = sum(r["decode_time_s"] for r in arm.results)
        return toks, secs

    f_toks, f_secs = decode_stats(full)
    f_tpot = f_secs / f_toks
    header = (f"{'policy':<13}{'tok/s':>7}{'TPOT ms':>9}{'x full':>8}{'exact':>7}"
              f"{'theo.sav':>9}{'real.sav':>9}{'real/theo':>10}{'accept':>8}{'tok/pass':>9}"
              f"{'overhead':>9}{'dec p99 ms':>11}")
    print(header)
    for arm in arms:
        toks, secs = decode_stats(arm)
        tpot = secs / toks if toks else float("nan")
        exact = sum(r["token_ids"] == f["token_ids"]
                    for r, f in zip(arm.results, full.results, strict=True)) / len(arm.results)
        theo = statistics.fmean(r["theoretical_saving"] for r in arm.results)
        real = 1 - tpot / f_tpot
        ratio = f"{real / theo:>10.2f}" if theo > 0.005 else f"{'-':>10}"
        prop = sum(r["draft_tokens_proposed"] for r in arm.results)
        acc = sum(r["draft_tokens_accepted"] for r in arm.results)
        accept = f"{acc / prop:>8.2f}" if prop else f"{'-':>8}"
        per_pass = f"{toks / arm.steps:>9.2f}" if arm.steps else f"{'-':>9}"
        overhead = statistics.fmean(r["decision_time_s"] / r["e2e_s"] for r in arm.results)
        p99 = sorted(r["decision_time_s"] for r in arm.results)[
            min(len(arm.results) - 1, int(0.99 * len(arm.results)))]
        print(f"{arm.name:<13}{toks / secs:>7.2f}{tpot * 1e3:>9.1f}{f_tpot / tpot:>8.2f}"
              f"{exact:>7.0%}{theo:>9.3f}{real:>9.3f}{ratio}{accept}{per_pass}"
              f"{overhead:>9.2%}{p99 * 1e3:>11.3f}")
    for arm in arms:
        if arm.note:
            print(f"  {arm.name}: {arm.note}")
    toks, secs = decode_stats(spec)
    prop = sum(r["draft_tokens_proposed"] for r in spec.results)
    predicted = (prop * times.draft_s[draft.label] + spec.steps * times.verify_s[gamma + 1]) / toks
    print(f"  speculative: draft {draft.label} gamma={gamma}; pass costs measured now: draft "
          f"{times.draft_s[draft.label] * 1e3:.1f} ms, verify({gamma + 1}) "
          f"{times.verify_s[gamma + 1] * 1e3:.1f} ms, full {times.full_s * 1e3:.1f} ms")
    f_toks, f_secs = decode_stats(arms[0])
    control = f_secs / f_toks / times.full_s
    ratio = secs / toks / predicted
    print(f"  speculative: predicted TPOT from its acceptance and pass costs "
          f"{predicted * 1e3:.1f} ms, realised {secs / toks * 1e3:.1f} ms "
          f"(realised / predicted {ratio:.2f})")
    print(f"  control: full realised TPOT / its measured pass {control:.2f} (engine overhead "
          f"and a busy machine); speculative normalised by it {ratio / control:.2f} "
          f"(1.00 = no waste)")


if __name__ == "__main__":
    main()
