"""Conversations on their own history (issue 54) on real engines: `own` mode beside
`recorded` on the same traffic, for an A/A, a lossless candidate and a lossy one
(docs/VALIDITY.md, "Conversations on their own history").

Starts reference engines of the bundled SmolLM2-135M (fp32, 1 thread each): baseline and
baseline2 at full depth, and the candidates named by --candidates:

  speculative  self-speculative decoding with the demo's switches: lossless
  dynamic      dynamic skipping with one rule, written into OUT/rules-long.json from
               the bundled rules: skip layer --long-skip (14, the least influential of
               the bundled ranking) on prompts of --long-prompt tokens or more (320), so
               the first turns of the bundled tool conversations (168-308 prompt tokens)
               run full depth and the later, longer ones do not: a policy that skips
               more where the context is long
  static       static pruning of the --static-layers least influential layers of the
               bundled ranking

and replays the traffic (default: the bundled tool-conversations.jsonl, recorded from the
full-depth engine itself) in both modes, the conversations --speed times faster than
recorded. For each arm against the baseline it prints the figures turn by turn as `gate`
computes them (`agreement_at_turn[k]`, the survival curve, and
`conversation_divergence_turn`, with their 95 % intervals: the conversation is the unit),
and beside them what the survival curve does not show: the share of conversations whose
answer at turn k is the baseline's (`same at k`, whatever came before), the run's
`exact_match` over all requests, and how many conversations ended in `own` mode (a call
unlike the recorded one). Writes OUT/conversations-validity.json.

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD nice -n 10 .venv/bin/python \\
        benchmarks/conversations_validity.py --out /tmp/cv
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from layergate.exporters import bundled
from layergate.exporters.catalogue import (
    AGREEMENT_AT_TURN,
    BASELINE,
    CONVERSATION_DIVERGENCE_TURN,
    EXACT_MATCH,
    OVERALL,
    PROMPT_TOKENS_AT_TURN,
    per_turn,
)
from layergate.exporters.figures.config import MetricsConfig
from layergate.exporters.model_files import DEFAULT_MODEL
from layergate.exporters.traffic import read_traffic
from layergate.harness.gate.fixed.family import candidate_figures
from layergate.harness.replay import ReplayConfig, run_replay
from layergate.harness.replay.own import conversations
from layergate.harness.rundir import RunDir, load_run
from layergate.harness.stack.demo_config import CANDIDATES
from layergate.harness.stack.engines import start_engine

MODES = ("own", "recorded")


def long_prompt_rules(out: Path, min_tokens: int, layer: int) -> Path:
    """The bundled rules with one dynamic rule: skip `layer` on prompts of `min_tokens`
    tokens or more."""
    rules = bundled.read_rules(bundled.rules_file(DEFAULT_MODEL))
    rules["dynamic"] = {"target_consistency": None, "chosen": None, "rules": [
        {"name": f"skip{layer}-prompt_len>={min_tokens}",
         "when": [{"feature": "prompt_len", "op": ">=", "value": float(min_tokens)}],
         "skip": [layer]}]}
    rules["notes"] = [f"written by benchmarks/conversations_validity.py: layer {layer} "
                      f"skipped on prompts of {min_tokens} tokens or more (not calibrated)"]
    path = out / "rules-long.json"
    path.write_text(json.dumps(rules, indent=1) + "\n")
    return path


def _engine_args(name: str, args: argparse.Namespace) -> tuple[str, ...]:
    if name in ("baseline", "baseline2"):
        return ("--skip-policy", "full")
    if name == "speculative":
        return ("--skip-policy", "speculative", *CANDIDATES["speculative"].switches())
    if name == "dynamic":
        rules = long_prompt_rules(args.out, args.long_prompt, args.long_skip)
        return ("--skip-policy", "dynamic", "--rules", str(rules))
    if name == "static":
        ranking = bundled.read_rules(bundled.rules_file(DEFAULT_MODEL))["static"]["ranking"]
        layers = ",".join(str(i) for i in sorted(ranking[:args.static_layers]))
        return ("--skip-policy", "static", "--skip-layers", layers)
    raise SystemExit(f"unknown candidate {name!r}: speculative, dynamic or static")


def _same_by_turn(run: Path, traffic: Path, arm: str) -> tuple[list[float], int]:
    """(per turn k: the share of conversations with a turn k whose answer there is the
    baseline's, a missing answer counting as different; conversations ended in own mode)."""
    store = RunDir(run).open_store()
    try:
        rows = {(r.request_id, r.arm): r for r in store.results()}
    finally:
        store.close()

    def said(rid: str, who: str) -> Any:
        r = rows.get((rid, who))
        if r is None or not r.ok:
            return None
        return (r.output_text, r.refusal,
                [(c.name, json.loads(c.arguments or "{}")) for c in r.tool_calls])

    convs = [c for c in conversations(read_traffic(traffic).records) if len(c) > 1]
    width = max(len(c) for c in convs)
    shares = []
    for k in range(width):
        at = [c[k].id for c in convs if len(c) > k]
        shares.append(sum(said(rid, arm) is not None and said(rid, arm) == said(rid, BASELINE)
                          for rid in at) / len(at))
    with sqlite3.connect(run / "results.sqlite") as conn:
        ended = conn.execute("SELECT COUNT(*) FROM conversation_ends WHERE arm = ?",
                             (arm,)).fetchone()[0]
    return shares, ended


def _figure(figures: list, name: str, arm: str) -> Any:
    return next((f for f in figures if f.name == name and f.arm == arm
                 and f.scenario == OVERALL), None)


def _interval(f: Any) -> str:
    if f is None or f.value is None:
        return "-"
    return f"{f.value:.2f} [{f.ci_low:.2f}, {f.ci_high:.2f}]"


def report(run: Path, traffic: Path, arms: list[str], mode: str) -> dict[str, Any]:
    figures = candidate_figures(load_run(run), MetricsConfig(min_samples=1))
    convs = [c for c in conversations(read_traffic(traffic).records) if len(c) > 1]
    width = max(len(c) for c in convs)
    out: dict[str, Any] = {}
    _, ended = _same_by_turn(run, traffic, BASELINE)
    out["baseline_ended"] = ended  # a full-depth arm makes the recorded calls: none
    print(f"{'baseline':12s} {mode:8s} conversations ended: {ended}", flush=True)
    for arm in arms:
        same, ended = _same_by_turn(run, traffic, arm)
        agreement = [_figure(figures, per_turn(AGREEMENT_AT_TURN, k), arm)
                     for k in range(1, width + 1)]
        divergence = _figure(figures, CONVERSATION_DIVERGENCE_TURN, arm)
        exact = _figure(figures, EXACT_MATCH, arm)
        out[arm] = {"agreement_at_turn": [_interval(f) for f in agreement],
                    "same_at_turn": [round(s, 3) for s in same],
                    "conversation_divergence_turn": _interval(divergence),
                    "exact_match": _interval(exact), "ended": ended}
        print(f"{arm:12s} {mode:8s} agreement_at_turn "
              f"{'; '.join(f'[{k}] {v}' for k, v in enumerate(out[arm]['agreement_at_turn'], 1))}"
              f"\n{'':21s} same at k {' '.join(f'{s:.2f}' for s in same)}; "
              f"divergence turn {out[arm]['conversation_divergence_turn']}; exact_match "
              f"{out[arm]['exact_match']}; ended {ended}", flush=True)
    prompts = [_figure(figures, per_turn(PROMPT_TOKENS_AT_TURN, k), BASELINE)
               for k in range(1, width + 1)]
    out["baseline_prompt_tokens_at_turn"] = [round(f.value, 1) if f else None for f in prompts]
    print(f"{'baseline':12s} {mode:8s} prompt_tokens_at_turn "
          f"{out['baseline_prompt_tokens_at_turn']}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--traffic", type=Path,
                        default=bundled.scenarios_dir() / "traffic" / "tool-conversations.jsonl")
    parser.add_argument("--candidates", default="speculative,dynamic")
    parser.add_argument("--long-prompt", type=int, default=320)
    parser.add_argument("--long-skip", type=int, default=14)
    parser.add_argument("--static-layers", type=int, default=1)
    parser.add_argument("--speed", type=float, default=4.0)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--url", action="append", default=[], metavar="ARM=URL",
                        help="an engine already running for an arm (else one is started)")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    names = ["baseline", "baseline2", *args.candidates.split(",")]
    given = dict(u.split("=", 1) for u in args.url)
    engines = {n: start_engine(*_engine_args(n, args)) for n in names if n not in given}
    results: dict[str, Any] = {"traffic": str(args.traffic), "candidates": {
        n: list(_engine_args(n, args)) for n in names}}
    try:
        arms = {**given, **{n: p.url for n, p in engines.items()}}
        for mode in args.modes.split(","):
            t0 = time.monotonic()
            run = run_replay(ReplayConfig(out=args.out / mode, traffic=args.traffic, arms=arms,
                                          conversation_mode=mode, progress=False,
                                          timeout=600, speed=args.speed, max_in_flight=4))
            print(f"== {mode} mode, {time.monotonic() - t0:.0f} s: {run}", flush=True)
            results[mode] = report(run, args.traffic, names[1:], mode)
            (args.out / "conversations-validity.json").write_text(
                json.dumps(results, indent=1) + "\n")
    finally:
        for proc in engines.values():
            proc.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
