"""Does the accuracy interval hold on the real model? A/A runs and a planted loss.

The bundled evaluation set (scenarios/traffic/accuracy.jsonl, 80 questions with reference
answers) is replayed through three full-depth engines of the real model (SmolLM2-135M,
1 torch thread each), with *sampled* decoding: with greedy decoding two full-depth
engines answer alike and every A/A interval is [0, 0], which measures nothing.

Every arm sits behind a proxy that seeds each request for its own arm and run (the body
carries no seed; the proxy adds one from the run, the arm and the prompt), so every arm of
every run draws its own sample of each answer from the same model: the true accuracy
delta between any two arms is 0.

  aa       the candidate is a third full-depth engine. A false alarm is a run whose 95 %
           `accuracy_delta` interval excludes 0 (and, under `lossy.yaml`, a failed
           accuracy check: wholly below -0.02). baseline2 against baseline is a second
           A/A reading of the same run.
  planted  (and `greedy`: the same at temperature 0, where the arms answer alike and
           the truth of a run is exactly minus the planted questions the baseline had
           right) the candidate's proxy also blanks every letter and digit of its answers to a
           known share (`--share`, 10 %) of the questions, drawn afresh every run: those
           answers are wrong by construction, the rest are the model's own. Power: the
           share of runs whose interval lies wholly below 0, and that `lossy.yaml` fails.

Prints every run's figures and then the rates with exact Clopper-Pearson intervals;
writes OUT/accuracy-validity.json after every run (a series cut short keeps what it ran).

    .venv/bin/python benchmarks/accuracy_validity.py --aa 24 --planted 12 --greedy 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's harness

from layergate.exporters.catalogue import (  # noqa: E402
    ACCURACY,
    ACCURACY_DELTA,
    ACCURACY_MCNEMAR_P,
    BASELINE,
    BASELINE2,
    CANDIDATE,
)
from layergate.harness.gate import evaluate_run  # noqa: E402
from layergate.harness.gate.fixed.evaluation import metrics_config, run_figures  # noqa: E402
from layergate.harness.gate.policy import default_policy_dir, load_policy  # noqa: E402
from layergate.harness.replay import ReplayConfig, run_replay  # noqa: E402
from layergate.harness.rundir import load_run  # noqa: E402
from layergate.harness.stack.engines import start_engine  # noqa: E402
from tests.support.asgi_proxy import AsgiProxy  # noqa: E402

TRAFFIC = ROOT / "scenarios" / "traffic" / "accuracy.jsonl"
ARMS = (BASELINE, BASELINE2, CANDIDATE)


def prompt_key(body: dict) -> str:
    """What identifies a question in a request body: its messages (or prompt) as JSON."""
    return json.dumps(body.get("messages", body.get("prompt")), sort_keys=True)


def blank(text: str) -> str:
    """`text` with every letter and digit replaced: no reference of the set can match it
    (they all need a word or a number)."""
    return "".join("#" if ch.isalnum() else ch for ch in text)


class SeedProxy(AsgiProxy):
    """Forwards to `upstream`, giving each request without a `seed` one from (salt, its
    prompt); answers to prompts in `planted` have their content blanked, chunk by chunk."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.salt, self.planted = "", frozenset()

    async def handle(self, request):
        import httpx
        from starlette.responses import Response, StreamingResponse

        raw = await request.body()
        planted = False
        if request.method == "POST" and request.url.path.startswith("/v1/"):
            body = json.loads(raw)
            key = prompt_key(body)
            planted = key in self.planted
            if body.get("seed") is None:
                body["seed"] = zlib.crc32(f"{self.salt}|{key}".encode())
            raw = json.dumps(body).encode()
        client = httpx.AsyncClient(timeout=None)
        upstream = await client.send(client.build_request(
            request.method, self.upstream + request.url.path, content=raw,
            headers={"content-type": request.headers.get("content-type", "application/json")}),
            stream=True)
        if not planted:
            body = await upstream.aread()
            await client.aclose()
            return Response(body, upstream.status_code,
                            media_type=upstream.headers.get("content-type"))

        async def blanked():
            pending = b""
            try:
                async for chunk in upstream.aiter_raw():
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    yield b"".join(_blank_line(line) + b"\n" for line in lines)
                if pending:
                    yield _blank_line(pending)
            finally:
                await upstream.aclose()
                await client.aclose()

        return StreamingResponse(blanked(), upstream.status_code,
                                 media_type=upstream.headers.get("content-type"))


def _blank_line(line: bytes) -> bytes:
    """One SSE line with the content of its choices blanked (other lines as they are)."""
    if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
        return line
    event = json.loads(line[6:])
    for choice in event.get("choices") or []:
        for part in (choice.get("delta"), choice.get("message")):
            if part and isinstance(part.get("content"), str):
                part["content"] = blank(part["content"])
        if isinstance(choice.get("text"), str):
            choice["text"] = blank(choice["text"])
    return b"data: " + json.dumps(event).encode()


def sampled_traffic(out: Path, temperature: float) -> tuple[Path, list[str], list[str]]:
    """The evaluation set with sampled decoding, its questions' prompt keys and ids."""
    records = [json.loads(line) for line in TRAFFIC.read_text().splitlines() if line.strip()]
    for r in records:
        r["body"]["temperature"] = temperature
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    return out, [prompt_key(r["body"]) for r in records], [str(r["id"]) for r in records]


@contextlib.contextmanager
def arms_behind_proxies() -> Iterator[dict[str, SeedProxy]]:
    """Three full-depth engines, one torch thread each, each behind its SeedProxy."""
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs = []
    try:
        with contextlib.ExitStack() as stack:
            proxies = {}
            for arm in ARMS:
                proc = start_engine("--skip-policy", "full", threads=1, env=env, timeout=600)
                procs.append(proc)
                proxies[arm] = stack.enter_context(SeedProxy(proc.url))
                print(f"  {arm}: engine {proc.url} behind {proxies[arm].url}", flush=True)
            yield proxies
    finally:
        for proc in procs:
            proc.stop()


def one_run(kind: str, number: int, proxies: dict[str, SeedProxy], traffic: dict[str, Path],
            keys: list[str], args) -> dict:
    """One replay of the set: fresh seeds per arm (and a fresh planted share), judged."""
    rng = random.Random(f"{args.seed}|{kind}|{number}")
    planted = rng.sample(range(len(keys)), round(args.share * len(keys))) \
        if kind != "aa" else []
    for arm, proxy in proxies.items():
        proxy.salt = f"{args.seed}|{kind}|{number}|{arm}"
        proxy.planted = frozenset(keys[i] for i in planted) if arm == CANDIDATE else frozenset()
    out = Path(args.out) / f"{kind}-{number:02d}"
    t0 = time.monotonic()
    run_dir = run_replay(ReplayConfig(out=out, arms={a: p.url for a, p in proxies.items()},
                                      traffic=traffic[kind], users=args.users, timeout=300,
                                      progress=False))
    run = load_run(run_dir)
    policy = load_policy(default_policy_dir() / "lossy.yaml")
    figures = {(f.name, f.arm): f for f in run_figures(run, metrics_config(policy, run))
               if f.scenario == "all"}
    lossy = {c.name: c.status for c in evaluate_run(run, policy).overall}

    def fig(name: str, arm: str) -> list[float | None]:
        f = figures.get((name, arm))
        return [None, None, None] if f is None else [f.value, f.ci_low, f.ci_high]

    row = {"kind": kind, "number": number, "run_dir": str(run_dir),
           "seconds": round(time.monotonic() - t0, 1), "planted": planted,
           "accuracy": {arm: fig(ACCURACY, arm)[0] for arm in ARMS},
           "delta": {arm: fig(ACCURACY_DELTA, arm) for arm in (BASELINE2, CANDIDATE)},
           "mcnemar_p": {arm: fig(ACCURACY_MCNEMAR_P, arm)[0] for arm in (BASELINE2, CANDIDATE)},
           "lossy_accuracy_delta": lossy.get(ACCURACY_DELTA)}
    row["right"] = right_per_question(run_dir, load_run(run_dir))
    d = row["delta"][CANDIDATE]
    print(f"  [{kind} #{number}] {row['seconds']:.0f}s  accuracy "
          + " ".join(f"{a} {row['accuracy'][a]:.3f}" for a in ARMS)
          + f"  delta {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]"
          + f"  floor {row['delta'][BASELINE2][0]:+.3f}"
          + f"  lossy:{row['lossy_accuracy_delta']}", flush=True)
    return row


def right_per_question(run_dir: Path, run) -> dict[str, dict[str, bool]]:
    """arm -> request id -> answered right, scored by the project's own path."""
    from layergate.exporters.figures import accuracy
    from layergate.exporters.figures.aligned import align

    al = align(run.columns_with_recorded())
    scores = accuracy.score_outputs(al, accuracy.read_references(run_dir / "traffic.jsonl"))
    return {arm: {rid: bool(scores.right[arm][i])
                  for i, rid in enumerate(al.request_ids) if scores.scored[arm][i]}
            for arm in scores.right}


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact two-sided interval of a binomial share."""
    from scipy.stats import beta

    a = (1 - level) / 2
    return (0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1)),
            1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k)))


def summary(rows: list[dict], ids: list[str]) -> None:
    """The rates, with exact 95 % intervals."""
    def rate(test, runs: list[dict]) -> str:
        hits, n = sum(1 for r in runs if test(r)), len(runs)
        if not n:
            return "none"
        lo, hi = clopper_pearson(hits, n)
        return f"{hits}/{n} = {hits / n:.3f} [{lo:.3f}, {hi:.3f}]"

    def excludes(arm: str):
        return lambda r: r["delta"][arm][1] > 0 or r["delta"][arm][2] < 0

    def below(r: dict) -> bool:
        return r["delta"][CANDIDATE][2] < 0

    def lossy_fails(r: dict) -> bool:
        return r["lossy_accuracy_delta"] == "fail"

    def mcnemar(arm: str):
        return lambda r: (r["mcnemar_p"][arm] or 1) < 0.05

    def covers(r: dict) -> bool:
        d = r["delta"][CANDIDATE]
        return d[1] <= r["truth"] <= d[2]

    def mean(xs: list[float]) -> str:
        return f"{sum(xs) / len(xs):+.3f}"

    kinds = {k: [r for r in rows if r["kind"] == k] for k in ("aa", "planted", "greedy")}
    aa = kinds["aa"]
    print("\nA/A (true delta 0):")
    for arm in (CANDIDATE, BASELINE2):
        print(f"  {arm} - baseline: interval excludes 0 in {rate(excludes(arm), aa)}; "
              f"McNemar p < 0.05 in {rate(mcnemar(arm), aa)}")
    print(f"  lossy accuracy check failed in {rate(lossy_fails, aa)}")
    # each question's chance of a right answer when sampled, from every A/A arm
    answered = {rid: [r["right"][a][rid] for r in aa for a in ARMS if rid in r["right"][a]]
                for rid in ids}
    chance = {rid: sum(v) / len(v) if v else 0.0 for rid, v in answered.items()}
    for r in kinds["greedy"]:  # exact: the arms answer alike but for the planted ones
        r["truth"] = -sum(r["right"][BASELINE].get(ids[i], False) for i in r["planted"]) / len(ids)
    for r in kinds["planted"]:
        r["truth"] = -sum(chance[ids[i]] for i in r["planted"]) / len(ids)
    for kind, label in (("greedy", "temperature 0"), ("planted", "sampled")):
        runs = kinds[kind]
        if not runs:
            continue
        truth = [r["truth"] for r in runs]
        print(f"{label}, {len(runs[0]['planted'])} planted wrong answers:")
        print(f"  true delta mean {mean(truth)} (from {min(truth):+.3f} to {max(truth):+.3f}); "
              f"measured mean {mean([r['delta'][CANDIDATE][0] for r in runs])}")
        print(f"  interval wholly below 0 in {rate(below, runs)}; lossy accuracy check failed "
              f"in {rate(lossy_fails, runs)}; McNemar p < 0.05 in {rate(mcnemar(CANDIDATE), runs)}")
        print(f"  the interval covers the truth in {rate(covers, runs)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--aa", type=int, default=20, help="A/A runs")
    ap.add_argument("--planted", type=int, default=10, help="planted-loss runs")
    ap.add_argument("--greedy", type=int, default=10, help="planted-loss runs at temperature 0")
    ap.add_argument("--share", type=float, default=0.10, help="planted share of questions")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--users", type=int, default=4, help="closed-loop users per run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=f"runs/accuracy-validity-{time.strftime('%Y%m%d-%H%M%S')}")
    ap.add_argument("--summarise", metavar="JSON", help="print the rates of a finished series")
    args = ap.parse_args()
    if args.summarise:
        rows = json.loads(Path(args.summarise).read_text())
        summary(rows, [str(json.loads(line)["id"]) for line in TRAFFIC.read_text().splitlines()
                       if line.strip()])
        return
    Path(args.out).mkdir(parents=True, exist_ok=True)
    sampled, keys, ids = sampled_traffic(Path(args.out) / "sampled.jsonl", args.temperature)
    traffic = {"aa": sampled, "planted": sampled,
               "greedy": sampled_traffic(Path(args.out) / "greedy.jsonl", 0.0)[0]}
    counts = {"aa": args.aa, "planted": args.planted, "greedy": args.greedy}
    plan = [(kind, i) for kind, n in counts.items() for i in range(n)]
    # interleaved, so a series cut short keeps every kind and drift touches all alike
    plan.sort(key=lambda p: p[1] / counts[p[0]])
    rows: list[dict] = []
    with arms_behind_proxies() as proxies:
        for kind, number in plan:
            rows.append(one_run(kind, number, proxies, traffic, keys, args))
            (Path(args.out) / "accuracy-validity.json").write_text(json.dumps(rows, indent=1))
    summary(rows, ids)


if __name__ == "__main__":
    main()
