"""layergate itself in the side-by-side: `layergate replay` (Poisson arrivals at the rate,
or a closed loop of `Load.users` users with `--users U`; every request to the baseline and
to the candidate at once, as in a shadow replay) and the figures `layergate metrics --json`
writes for it. Both arms are the one server, so each arrival is two requests there (a closed
loop of U users has up to 2U in flight there); the CPU is counted per arm-request and per
paired request.

    layergate replay --traffic T --baseline URL --candidate URL (--rate R | --users U)
        --seed S --out RUN --no-progress
    layergate metrics RUN --json figures.json
"""

from __future__ import annotations

import json
import os
import types
from pathlib import Path

from benchmarks.peers.common import QUANTILES, Load, Measured, run_counted
from layergate.exporters.catalogue import BASELINE
from layergate.exporters.traffic import COMPLETIONS, TrafficRecord, write_traffic
from layergate.harness.processes import layergate_command

TOOL = "layergate"
WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly judge "
         "boxing matches near the old stone bridge").split()


def traffic(load: Load, path: Path) -> Path:
    """`load.requests` completions of `prompt_tokens` words each, asking for exactly
    `output_tokens` (the echo server answers one token per word asked for)."""
    prompt = " ".join((WORDS * (load.prompt_tokens // len(WORDS) + 1))[:load.prompt_tokens])
    body = {"prompt": prompt, "max_tokens": load.output_tokens, "stream": True,
            "ignore_eos": True}
    return write_traffic(path, [TrafficRecord(f"r-{i:05d}", 0.0, "peers", COMPLETIONS,
                                              {**body, "model": load.model})
                                for i in range(load.requests)])


def run(load: Load, work: Path, venv: Path | None = None,
        checkout: Path | None = None) -> Measured:
    """The replay, then its figures as `metrics --json` wrote them (the baseline arm's);
    layergate from `checkout` when given (see `at_checkout`)."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / "run"
    env = environment(checkout)
    _, cpu, wall = run_counted(layergate_command(
        *replay_args(load, traffic(load, work / "traffic.jsonl"), out)), cwd=work, env=env)
    figures = work / "figures.json"
    run_counted(layergate_command("metrics", str(out), "--json", str(figures)), cwd=work,
                env=env)
    return parse(figures, out / "manifest.json", cpu, wall, load.requests, load.users)


def replay_args(load: Load, traffic_file: Path, out: Path) -> list[str]:
    """`layergate replay`'s arguments for `load`: open loop at the rate, or closed loop."""
    pacing = ["--users", str(load.users)] if load.closed else ["--rate", f"{load.rate:g}"]
    return ["replay", "--traffic", str(traffic_file), "--baseline", load.url, "--candidate",
            load.url, *pacing, "--seed", str(load.seed), "--out", str(out), "--no-progress"]


def environment(checkout: Path | None) -> dict[str, str] | None:
    """The replay's environment: this one, or with `checkout`'s `layergate` package first
    on the path."""
    if checkout is None:
        return None
    if not (checkout / "layergate" / "__init__.py").is_file():
        raise ValueError(f"{checkout}: no layergate checkout (no layergate/__init__.py)")
    path = os.pathsep.join(filter(None, (str(checkout), os.environ.get("PYTHONPATH"))))
    return {**os.environ, "PYTHONPATH": path}


def at_checkout(tool: str) -> types.SimpleNamespace:
    """The adapter of a tool named `layergate@DIR`: layergate run from the checkout at DIR
    (an older commit measured beside this one)."""
    checkout = Path(tool.split("@", 1)[1]).resolve()
    environment(checkout)  # refuse a directory that holds no checkout, before any run
    return types.SimpleNamespace(
        TOOL=tool, run=lambda load, work, venv=None: run(load, work, venv, checkout))


def parse(figures: Path, manifest: Path, cpu: float, wall: float, paired: int,
          users: int = 0) -> Measured:
    """Measured from the files layergate wrote (a replay closed loop of `users` users, or
    Poisson when 0); an unreadable one is named."""
    try:
        got = json.loads(figures.read_text())["figures"]
        counts = json.loads(manifest.read_text())["counts"]
    except (OSError, ValueError, KeyError) as exc:
        raise ValueError(f"layergate's output {figures} / {manifest}: {exc}") from exc
    value = {f["name"]: f["value"] for f in got if f["arm"] == BASELINE
             and f["scenario"] == "all"}

    def latency(name: str) -> dict[int, float]:
        return {q: value[f"{name}_p{q}"] for q in QUANTILES if value.get(f"{name}_p{q}")}

    ok = sum(arm.get("ok", 0) for arm in counts.values())
    sent = (f"closed loop of {users} users (--users {users}), each request" if users
            else "Poisson arrivals, each")
    return Measured(TOOL, latency("ttft"), latency("itl"), latency("e2e"), ok, cpu, wall,
                    figures, notes=(f"{sent} to 2 arms ({ok} arm-requests, "
                                    f"{paired} paired); the baseline arm's figures",
                                    "TTFT and E2E from the intended send time; ITL: the gaps "
                                    "between streamed chunks after the first"))
